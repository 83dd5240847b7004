// A made-up algorithm (test/fixtures/algorithms/fixed-window.ts) registered
// with one line: the bundle schema accepts its config, validation runs its own
// check, and the engine enforces it on the memory store, Redis and PostgreSQL.
// A made-up limit kind (test/fixtures/kinds/gcra/: TypeScript, Lua,
// PL/pgSQL, and an algorithm on it) registered by one import of its
// register.ts (its line in the kind table, its algorithm's line): the engine
// enforces it on memory, shared memory, Redis and PostgreSQL, whose server
// scripts are assembled with it, and the four stores agree on its maths.
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { registerAlgorithm } from '../../../src/algorithms/index.js'
import { loadBundleFile } from '../../../src/bundle/load.js'
import { run as validateCommand } from '../../../src/commands/validate.js'
import type { Decision } from '../../../src/engine/decision.js'
import { Engine } from '../../../src/engine/evaluate.js'
import { MemoryStore } from '../../../src/store/memory/store.js'
import { RedisStore } from '../../../src/store/redis/store.js'
import { SharedMemoryStore } from '../../../src/store/threads/store.js'
import { SharedTable } from '../../../src/store/threads/table.js'
import { parseRedisUrl } from '../../../src/store/redis/url.js'
import type { Store } from '../../../src/store/store.js'
import { FIXED_WINDOW } from '../../fixtures/algorithms/fixed-window.js'
import { GCRA_KIND } from '../../fixtures/kinds/gcra/kind.js'
import '../../fixtures/kinds/gcra/register.js'
import { runDifferential } from '../../helpers/differential.js'
import { dropPrefix, openStore, uniquePrefix } from '../../helpers/postgres-db.js'
import { compile, Recorder, view } from '../../helpers/engine-harness.js'

registerAlgorithm(FIXED_WINDOW)

const dir = mkdtempSync(join(tmpdir(), 'fv-plugin-'))
const run = `${process.pid}x${Date.now().toString(36)}`
const doc = (config: object, algorithm = 'fixed_window'): object => ({
  bundle_version: 1,
  policies: [
    {
      id: 'p',
      spec: {
        selector: { pathPrefix: '/' },
        rules: [{ name: `fw${run}`, limit_keys: ['header:x-user'], algorithm, algorithm_config: config }],
      },
    },
  ],
})
function file(name: string, config: object): string {
  const p = join(dir, name)
  writeFileSync(p, JSON.stringify(doc(config)))
  return p
}

/** Runs `fairvisor validate` in-process (the registration lives in this process) and returns its exit code and output (stdout and stderr). */
async function validate(path: string): Promise<{ code: number; out: string }> {
  const chunks: string[] = []
  const out = process.stdout.write.bind(process.stdout)
  const err = process.stderr.write.bind(process.stderr)
  const capture = ((c: string | Uint8Array) => {
    chunks.push(String(c))
    return true
  }) as typeof process.stdout.write
  process.stdout.write = capture
  process.stderr.write = capture
  try {
    return { code: await validateCommand([path]), out: chunks.join('') }
  } finally {
    process.stdout.write = out
    process.stderr.write = err
  }
}

describe('a registered algorithm owns its contract', () => {
  it('the schema accepts its config and validate names it', async () => {
    const r = await validate(file('good.json', { limit: 3, window_seconds: 3600 }))
    assert.equal(r.code, 0, r.out)
    assert.match(r.out, new RegExp(`fw${run} fixed_window`))
  })

  it('the schema refuses a config missing a field, with a clear message', () => {
    const r = loadBundleFile(file('missing.json', { limit: 3 }), Date.now())
    assert.equal(r.ok, true, 'a bad policy is dropped, the bundle loads')
    assert.ok(r.ok && r.dropped.some((m) => m.includes('window_seconds is required but missing')), JSON.stringify(r))
  })

  it('its own check refuses a window that does not divide a day, and validate fails', async () => {
    const path = file('bad.json', { limit: 3, window_seconds: 7 })
    const r = await validate(path)
    assert.equal(r.code, 1, r.out)
    assert.match(r.out, /algorithm_config\/window_seconds: policy "p", rule "fw\S+": window_seconds \(7\) must divide a day \(86400\)/)
  })

  it('an unregistered name is still refused by the schema enum', () => {
    const p = join(dir, 'unknown.json')
    writeFileSync(
      p,
      JSON.stringify({
        bundle_version: 1,
        policies: [
          { id: 'p', spec: { selector: { pathPrefix: '/' }, rules: [{ name: 'r', algorithm: 'sliding_log', algorithm_config: {} }] } },
        ],
      }),
    )
    const r = loadBundleFile(p, Date.now())
    assert.ok(r.ok && r.dropped.some((m) => m.includes('"fixed_window"') && m.includes('not "sliding_log"')), JSON.stringify(r))
  })
})

const stores: [string, () => Promise<{ store: Store; close: () => Promise<void> }>][] = [
  ['memory', async () => ({ store: new MemoryStore({ maxBytes: 1 << 20 }), close: async () => {} })],
  // The worker threads' table: its cells hold any kind's state, so a new kind needs nothing there either.
  ['shared memory', async () => ({ store: new SharedMemoryStore({ table: SharedTable.create(1 << 20) }), close: async () => {} })],
  [
    'redis',
    async () => {
      const s = new RedisStore({ target: parseRedisUrl(process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'), timeoutMs: 1000 })
      if (!(await s.ready(3000))) throw new Error('no Redis at 127.0.0.1:6379')
      return { store: s, close: () => s.close() }
    },
  ],
  [
    'postgres',
    async () => {
      const prefix = uniquePrefix('fw')
      const s = await openStore(prefix)
      const close = async (): Promise<void> => {
        await s.close()
        await dropPrefix(prefix)
      }
      return { store: s, close }
    },
  ],
]

for (const [name, open] of stores) {
  describe(`made-up algorithms enforced by the engine on the ${name} store`, () => {
    let opened: { store: Store; close: () => Promise<void> }
    before(async () => (opened = await open()))
    after(async () => await opened.close())

    /** Four requests of one user under a limit of 3 per day: the decisions. */
    async function fourRequests(algorithm: string): Promise<Decision[]> {
      // A day-long window: a run cannot straddle two windows except exactly at UTC midnight.
      const bundle = compile(doc({ limit: 3, window_seconds: 86_400 }, algorithm), Date.now())
      const engine = new Engine({ store: opened.store, failPolicy: 'closed', observer: new Recorder() })
      const user = `${name}-${algorithm}-${run}`
      const decisions: Decision[] = []
      for (let i = 0; i < 4; i++)
        decisions.push(
          await new Promise((resolve) => engine.evaluate(bundle, view({ headers: { 'x-user': user } }), Date.now(), false, resolve)),
        )
      return decisions
    }

    it('fixed_window (an existing kind) allows limit requests per window, then rejects with its reason and headers', async () => {
      const d = await fourRequests('fixed_window')
      for (const a of d.slice(0, 3)) assert.equal(a.allowed, true, JSON.stringify(a))
      assert.deepEqual(
        d.slice(0, 3).map((a) => a.limit?.remaining),
        [2, 1, 0],
      )
      assert.equal(d[3]!.allowed, false)
      assert.equal(d[3]!.status, 429)
      assert.equal(d[3]!.reason, 'fixed_window_exceeded')
    })

    it('gcra (a made-up kind) allows limit requests at once, then rejects with its reason and headers', async () => {
      const d = await fourRequests('gcra')
      for (const a of d.slice(0, 3)) assert.equal(a.allowed, true, JSON.stringify(a))
      assert.deepEqual(
        d.slice(0, 3).map((a) => a.limit?.remaining),
        [2, 1, 0],
      )
      assert.equal(d[3]!.allowed, false)
      assert.equal(d[3]!.status, 429)
      assert.equal(d[3]!.reason, 'gcra_exceeded')
    })
  })
}

it("the made-up kind: memory, shared memory, Redis and PostgreSQL agree on its maths (the stores' differential property)", async () => {
  await runDifferential([GCRA_KIND], 20)
})
