/**
 * Property tests over bundles and costs: whatever JSON an operator (or a
 * half-written file) hands over, validation and compilation return a result
 * and never throw, and a cost is a positive finite number or nothing.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { parseCost } from '../../src/bundle/compile.js'
import { loadBundleBytes } from '../../src/bundle/load.js'
import { validateBundle } from '../../src/bundle/validate.js'

const NOW = Date.UTC(2026, 0, 15)
const RUNS = { numRuns: 300 }

/** Bundles that are nearly right: the fields the schema knows, filled with arbitrary JSON at every level. */
const anyValue = fc.jsonValue({ maxDepth: 3 })
const rule = fc.record(
  {
    name: fc.oneof(fc.string(), anyValue),
    limit_keys: fc.oneof(
      fc.array(fc.constantFrom('jwt:sub', 'header:x-user', 'query:k', 'ip:address', 'ua:bot', 'ip:city', 'nope')),
      anyValue,
    ),
    algorithm: fc.oneof(fc.constantFrom('token_bucket', 'cost_based', 'token_bucket_llm'), anyValue),
    algorithm_config: fc.oneof(
      fc.record(
        {
          rps: anyValue,
          tokens_per_second: fc.double(),
          burst: fc.double(),
          cost_source: fc.constantFrom('fixed', 'header:x-cost', 'query:c', 'body:x'),
          fixed_cost: fc.double(),
          staged_actions: anyValue,
        },
        { requiredKeys: [] },
      ),
      anyValue,
    ),
    match: fc.oneof(fc.dictionary(fc.constantFrom('jwt:plan', 'header:x', 'bad key'), anyValue), anyValue),
  },
  { requiredKeys: [] },
)
const policy = fc.record(
  {
    id: fc.oneof(fc.string(), anyValue),
    spec: fc.oneof(
      fc.record(
        {
          selector: fc.oneof(
            fc.record(
              {
                pathPrefix: fc.oneof(fc.string(), anyValue),
                pathExact: fc.string(),
                methods: anyValue,
                hosts: fc.oneof(fc.array(fc.string()), anyValue),
              },
              { requiredKeys: [] },
            ),
            anyValue,
          ),
          mode: fc.oneof(fc.constantFrom('enforce', 'shadow'), anyValue),
          rules: fc.oneof(fc.array(rule, { maxLength: 3 }), anyValue),
          fallback_limit: fc.oneof(rule, anyValue),
          loop_detection: anyValue,
          circuit_breaker: anyValue,
        },
        { requiredKeys: [] },
      ),
      anyValue,
    ),
  },
  { requiredKeys: [] },
)
const bundle = fc.record(
  {
    bundle_version: fc.oneof(fc.integer(), anyValue),
    expires_at: fc.oneof(fc.constantFrom('2030-01-01T00:00:00Z', '2020-02-30T00:00:00Z'), anyValue),
    policies: fc.oneof(fc.array(policy, { maxLength: 4 }), anyValue),
    kill_switches: fc.oneof(
      fc.array(
        fc.record(
          { scope_key: fc.oneof(fc.constantFrom('header:x', 'ip:city', 'tenant'), anyValue), scope_value: anyValue, expires_at: anyValue },
          { requiredKeys: [] },
        ),
      ),
      anyValue,
    ),
    global_shadow: fc.oneof(fc.record({ enabled: fc.boolean(), reason: fc.string(), expires_at: fc.string() }), anyValue),
    kill_switch_override: anyValue,
  },
  { requiredKeys: [] },
)

test('validateBundle never throws on arbitrary JSON, and each issue has a pointer and a message', () => {
  fc.assert(
    fc.property(fc.oneof(anyValue, bundle), (doc) => {
      for (const i of validateBundle(doc, NOW)) {
        assert.equal(typeof i.pointer, 'string')
        assert.ok(i.pointer === '' || i.pointer.startsWith('/'), i.pointer)
        assert.ok(i.message.length > 0)
      }
    }),
    RUNS,
  )
})

test('loading (validate + compile) never throws and ends in a result; a loaded bundle has its version', () => {
  fc.assert(
    fc.property(fc.oneof(anyValue, bundle), (doc) => {
      const r = loadBundleBytes(Buffer.from(JSON.stringify(doc) ?? 'null'), 'p.json', NOW)
      if (r.ok) assert.equal(r.bundle.version, (doc as { bundle_version: number }).bundle_version)
      else assert.ok(r.errors.length > 0 && r.errors.every((e) => e.startsWith('p.json: ')))
    }),
    RUNS,
  )
})

test('loading arbitrary bytes never throws', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
      loadBundleBytes(Buffer.from(bytes), 'p.json', NOW)
    }),
    RUNS,
  )
})

test('parseCost returns a positive finite number or undefined, never 0, negative, NaN or Infinity', () => {
  const costish = fc.oneof(
    fc.string(),
    fc.double().map(String),
    fc.integer().map(String),
    fc.constantFrom('0', '0.0', '-1', '1e400', 'Infinity', 'NaN', '0x10', ' 5 ', '1_000', '9'.repeat(400), `0.${'0'.repeat(400)}1`),
  )
  fc.assert(
    fc.property(fc.option(costish, { nil: undefined }), (raw) => {
      const c = parseCost(raw)
      if (c !== undefined) assert.ok(Number.isFinite(c) && c > 0, `${JSON.stringify(raw)} → ${c}`)
    }),
    { numRuns: 1000 },
  )
})
