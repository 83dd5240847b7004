/**
 * A made-up limit kind through the real gateway process: the fixture folder
 * test/fixtures/kinds/gcra/ (its TypeScript, Lua and PL/pgSQL, and
 * an algorithm on it) is compiled against the built gateway (dist/) and its
 * register.ts loaded with `--import` (worker threads inherit it), so the
 * gateway runs as deployed plus that one module. A bundle rule naming
 * `gcra` is then enforced exactly, 40 requests at once on fresh
 * connections against a limit of 10, by each store: memory (one thread),
 * shared memory (two workers, both serving), Redis (the Lua twin, whose
 * packed state is read back) and PostgreSQL (the PL/pgSQL twin, whose row is
 * read back).
 */
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'
import ts from 'typescript'
import { ROOT, startGateway } from '../helpers/processes.js'
import { dropPrefix, PG_URL, sql, uniquePrefix } from '../helpers/postgres-db.js'
import { deleteKeys } from '../helpers/redis-servers.js'

const REDIS_URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const FIXTURE = fileURLToPath(new URL('../fixtures/kinds/gcra/', import.meta.url))
const LIMIT = 10
const REQUESTS = 40
const DAY_S = 86_400
const run = `${process.pid}x${Date.now().toString(36)}`
const rule = `gc${run}`
const dir = mkdtempSync(join(tmpdir(), 'fv-kind-plugin-'))
const pgPrefix = uniquePrefix('gckind')
after(async () => {
  rmSync(dir, { recursive: true, force: true })
  await Promise.all([deleteKeys(REDIS_URL, `gc:${rule}:*`), dropPrefix(pgPrefix)])
})

/** The fixture folder as JavaScript in `out`, its imports of the gateway's sources pointed at the built gateway; returns register.js. */
function compileFixture(out: string): string {
  mkdirSync(out)
  const dist = pathToFileURL(join(ROOT, 'dist/')).href
  for (const file of readdirSync(FIXTURE).filter((f) => f.endsWith('.ts'))) {
    const { outputText } = ts.transpileModule(readFileSync(join(FIXTURE, file), 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
    })
    writeFileSync(join(out, file.replace(/\.ts$/, '.js')), outputText.replaceAll("'../../../../src/", `'${dist}`))
  }
  return join(out, 'register.js')
}
const preload = compileFixture(join(dir, 'fixture'))

const bundle = join(dir, 'bundle.json')
writeFileSync(
  bundle,
  JSON.stringify({
    bundle_version: 1,
    policies: [
      {
        id: 'p',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [
            {
              name: rule,
              limit_keys: ['header:x-user'],
              algorithm: 'gcra',
              algorithm_config: { limit: LIMIT, window_seconds: DAY_S },
            },
          ],
        },
      },
    ],
  }),
)

/** `n` requests at once, each on a new connection (so the kernel spreads them over workers): status → [count, reasons]. */
async function spread(port: number, user: string, n: number): Promise<{ statuses: Map<number, number>; reasons: Set<string> }> {
  const answers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<[number, string]>((done) => {
          const headers = { 'x-original-uri': '/work', 'x-original-method': 'GET', 'x-user': user }
          const req = request({ host: '127.0.0.1', port, path: '/v1/decision', method: 'POST', agent: false, headers }, (res) => {
            res.resume()
            res.on('end', () => done([res.statusCode!, String(res.headers['x-fairvisor-reason'] ?? '')]))
          })
          req.on('error', () => done([0, '']))
          req.end()
        }),
    ),
  )
  const statuses = new Map<number, number>()
  const reasons = new Set<string>()
  for (const [status, reason] of answers) {
    statuses.set(status, (statuses.get(status) ?? 0) + 1)
    if (status === 429) reasons.add(reason)
  }
  return { statuses, reasons }
}

/** The schedule the kind keeps after `LIMIT` requests of a day's `LIMIT`: a day after the first, which came within the last `withinS`. */
function dayAhead(tat: number, withinS: number): boolean {
  const now = Date.now() / 1000
  return tat > now + DAY_S - withinS && tat <= now + DAY_S
}

const stores: [string, Record<string, string>, ((user: string) => Promise<void>)?][] = [
  ['memory', { FAIRVISOR_WORKERS: '1' }],
  ['shared memory', { FAIRVISOR_WORKERS: '2' }],
  [
    'redis',
    { FAIRVISOR_STORE: REDIS_URL },
    async (user) => {
      const r = new Redis(REDIS_URL)
      try {
        const state = await r.getBuffer(`gc:${rule}:${user}`)
        assert.ok(state && state.length === 8, 'the Lua twin packed <tat>')
        assert.ok(dayAhead(state.readDoubleLE(0), 60), `schedule ${state.readDoubleLE(0)}`)
      } finally {
        r.disconnect()
      }
    },
  ],
  [
    'postgres',
    { FAIRVISOR_STORE: PG_URL, FAIRVISOR_PG_TABLE_PREFIX: pgPrefix },
    async (user) => {
      const rows = await sql<{ s0: number }>(`SELECT s0 FROM ${pgPrefix}counters WHERE key = $1`, [`gc:${rule}:${user}`])
      assert.equal(rows.length, 1)
      assert.ok(dayAhead(rows[0]!.s0, 60), `the PL/pgSQL twin wrote the schedule: ${rows[0]!.s0}`)
    },
  ],
]

describe('a made-up limit kind registered in the gateway process', () => {
  for (const [name, env, inspect] of stores) {
    it(`is enforced exactly on the ${name} store: ${LIMIT} of ${REQUESTS} concurrent requests allowed, the rest rejected with its reason`, async () => {
      const gw = await startGateway(
        {
          FAIRVISOR_MODE: 'decision_service',
          FAIRVISOR_CONFIG_FILE: bundle,
          FAIRVISOR_ACCESS_LOG: 'true',
          FAIRVISOR_STORE_TIMEOUT_MS: '2000',
          ...env,
        },
        { timeoutMs: 30_000, nodeArgs: ['--import', pathToFileURL(preload).href] },
      )
      try {
        const user = name.replace(' ', '-')
        const { statuses, reasons } = await spread(gw.port, user, REQUESTS)
        assert.deepEqual([...statuses.entries()].sort(), [
          [200, LIMIT],
          [429, REQUESTS - LIMIT],
        ])
        assert.deepEqual([...reasons], ['gcra_exceeded'])
        if (env.FAIRVISOR_WORKERS === '2') {
          // The kernel picks which worker accepts a connection: more (rejected) requests until both have decided.
          const served = (): number[] => [...new Set(gw.logs.filter((l) => l.msg === 'access').map((l) => l.worker as number))].sort()
          for (let i = 0; i < 20 && served().length < 2; i++) {
            const more = await spread(gw.port, user, 10)
            assert.deepEqual([...more.statuses.entries()], [[429, 10]], 'the limit is spent, whichever worker decides')
          }
          assert.deepEqual(served(), [1, 2], 'both workers decided on the shared table')
        }
        await inspect?.(user)
      } finally {
        assert.equal(await gw.stop(), 0)
      }
    })
  }
})
