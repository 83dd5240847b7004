/**
 * The RLS configuration compiled into the engine's form: a policy per
 * domain, a window-counter rule per limit whose counter keys read as
 * envoyproxy/ratelimit's configuration names them, the answer's
 * current_limit built once; compiled once per configuration object.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { RLS_LIMIT } from '../../../src/algorithms/rls-limit.js'
import type { CounterLimit } from '../../../src/algorithms/kinds/window-counter/kind.js'
import { toStruct } from '../../../src/decision/rls-metadata.js'
import { compileRls, overrideRule } from '../../../src/grpc/rls-compile.js'
import { parseRlsYaml } from '../../../src/grpc/rls-config.js'
import { matchLimit } from '../../../src/grpc/rls-match.js'
import { ROOT } from '../../helpers/processes.js'

const yaml = readFileSync(join(ROOT, 'test/fixtures/rls/readme-examples.yaml'), 'utf8')

test('a domain is the policy rls:<domain>; a limit, a window-counter rule keyed rls:<domain>_…', () => {
  const messaging = compileRls(parseRlsYaml(yaml, 'x.yaml')).get('messaging')!
  assert.equal(messaging.policy.id, 'rls:messaging')
  assert.equal(messaging.view.method, 'POST')
  assert.equal(messaging.view.path, '/messaging')
  const limit = matchLimit(messaging.root, [
    { key: 'message_type', value: 'marketing' },
    { key: 'to_number', value: '1' },
  ])!
  const r = messaging.rules.get(limit)!
  assert.equal(r.rule!.name, 'message_type_marketing.to_number', 'named by where it sits in the tree')
  assert.equal(r.rule!.algorithm, RLS_LIMIT)
  assert.equal(r.rule!.counterPrefix, 'rls:messaging_')
  assert.equal(r.rule!.shadowCounterPrefix, 'rls:messaging_', 'shadow_mode counts on the same counter')
  const l = r.rule!.limit as CounterLimit
  assert.deepEqual([l.limit, l.windowS, l.origin], [5, 86_400, 0])
  assert.deepEqual(r.current, { requests_per_unit: 5, unit: 4 })
  assert.deepEqual(messaging.policy.rules.length, 2)
  assert.equal(messaging.replaces, false)
})

test('unlimited: no rule; name, replaces and shadow_mode carried; named limits keep their name', () => {
  const c = compileRls(parseRlsYaml(yaml, 'x.yaml'))
  const internal = c.get('internal')!
  assert.equal(internal.rules.get(matchLimit(internal.root, [{ key: 'ldap', value: 'x' }])!)!.rule, undefined)
  const e7 = c.get('example7')!
  assert.equal(e7.replaces, true)
  const global = e7.rules.get(matchLimit(e7.root, [{ key: 'key1', value: 'value1' }])!)!
  assert.equal(global.rule!.name, 'global')
  assert.deepEqual(global.current, { requests_per_unit: 3, unit: 3, name: 'global' })
  assert.deepEqual(e7.rules.get(matchLimit(e7.root, [{ key: 'key2', value: 'value2' }])!)!.replaces, ['global'])
  assert.equal(c.get('example6')!.rules.values().next().value!.shadow, true)
})

test('compiled once per configuration object; a reloaded configuration is compiled anew', () => {
  const config = parseRlsYaml(yaml, 'x.yaml')
  assert.equal(compileRls(config), compileRls(config))
  assert.notEqual(compileRls(parseRlsYaml(yaml, 'x.yaml')), compileRls(config))
})

test("the limit's RateLimit-* values: hits left in the window, none once rejected", () => {
  const l = compileRls(parseRlsYaml(yaml, 'x.yaml')).get('internal')!.policy.rules[0]!.limit as CounterLimit
  assert.deepEqual(RLS_LIMIT.headers(l, 40, 20, false), { limit: 100, remaining: 60, resetS: 20, windowS: 60 })
  assert.deepEqual(RLS_LIMIT.headers(l, 100, 20, true), { limit: 100, remaining: 0, resetS: 20, windowS: 60 })
  assert.equal(RLS_LIMIT.rejectReason, 'rls_over_limit')
})

test("a limit's metadata compiled once into the Struct the answer carries", () => {
  const c = compileRls(parseRlsYaml(readFileSync(join(ROOT, 'test/fixtures/rls/upstream/metadata.yaml'), 'utf8'), 'm.yaml'))
  const d = c.get('test-domain')!
  const key2 = d.rules.get(matchLimit(d.root, [{ key: 'key2', value: 'x' }])!)!
  assert.deepEqual(key2.metadata, toStruct({ service_with_quota: { name: 'service_2' } }))
  assert.equal(
    d.rules.get(
      matchLimit(d.root, [
        { key: 'key1', value: 'value1' },
        { key: 'subkey1', value: 'subvalue1' },
      ])!,
    )!.metadata,
    undefined,
  )
})

test("a limit override's rule: its rate and unit, no name, neither shadow nor quota; on the limit's counter or one of its unit", () => {
  const internal = compileRls(parseRlsYaml(yaml, 'x.yaml')).get('internal')!
  const shared = overrideRule(internal, { requestsPerUnit: 7, unit: 'hour' }, true)
  assert.deepEqual(shared.current, { requests_per_unit: 7, unit: 3 })
  assert.deepEqual([shared.name, shared.replaces, shared.shadow, shared.quota, shared.metadata], [undefined, [], false, false, undefined])
  const l = shared.rule!.limit as CounterLimit
  assert.deepEqual([l.limit, l.windowS, l.origin], [7, 3600, 0])
  assert.equal(shared.rule!.counterPrefix, 'rls:internal_')
  const apart = overrideRule(internal, { requestsPerUnit: 7, unit: 'hour' }, false)
  assert.equal(apart.rule!.counterPrefix, 'rls@hour:internal_')
  assert.equal(apart.rule!.shadowCounterPrefix, 'rls@hour:internal_')
  // Made once per rate, unit and counter.
  assert.equal(overrideRule(internal, { requestsPerUnit: 7, unit: 'hour' }, true), shared)
  assert.notEqual(overrideRule(internal, { requestsPerUnit: 8, unit: 'hour' }, true), shared)
})
