/**
 * Every kind's Lua and PL/pgSQL twins decide as its TypeScript at any
 * instant. The stores' differential test runs them on the servers' own
 * clocks, so only the present is ever tried there, a few milliseconds apart;
 * here each twin runs inside its real server (a Redis script, a PL/pgSQL
 * function) on instants the test gives it, from 1970 to the 2060s (epoch seconds as doubles
 * still hold the microsecond the token bucket rounds to), so what
 * depends on the date (calendar months, leap years, window boundaries met to
 * the microsecond) is compared exactly: the same outcome and wait, and the
 * same figure to the float epsilon, step after step of a random sequence of
 * requests and adjustments. Each language keeps its own state between steps,
 * forgotten at its own expiry, as its store does.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import pg from 'pg'
import type { Limit, LimitKind } from '../../src/algorithms/algorithm.js'
import { KINDS } from '../../src/algorithms/kinds/index.js'
import { slidingLimit } from '../../src/algorithms/kinds/sliding-window/kind.js'
import { counterLimit, SUNDAY_ORIGIN_S } from '../../src/algorithms/kinds/window-counter/kind.js'
import type { ParamRange } from '../../src/algorithms/kinds/twins.js'
import { dispatch, schemaSql } from '../../src/store/postgres/sql.js'
import { kindsLua } from '../../src/store/redis/script.js'
import { dropPrefix, PG_URL, uniquePrefix } from '../helpers/postgres-db.js'

const REDIS_URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = uniquePrefix('twins')

/**
 * The Lua twins on given instants: ARGV kind, p1, p2, p3, then per operation
 * the time (µs), 's' (step) or 'a' (adjust), the cost or amount and, for an
 * adjustment, when the adjusted charge was made (seconds). The state
 * is kept between operations as the take and adjust frames keep it (a reject
 * writes only when it asks to), and dropped when its TTL has run out.
 */
const LUA = `${kindsLua('\nlocal now, nowS = 0, 0')}
local kind = tonumber(ARGV[1])
local p1, p2, p3 = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local v, expires, out = false, 0, {}
for i = 5, #ARGV, 4 do
  now = tonumber(ARGV[i])
  nowS = now / 1000000
  if v and now >= expires then v = false end
  if ARGV[i + 1] == 's' then
    local ok, value, retry, state, ttl, commit = step[kind](v, p1, p2, p3, tonumber(ARGV[i + 2]))
    if ok or commit then v, expires = state, now + ttl * 1000 end
    out[#out + 1] = pack('<bdd', ok and 1 or 0, value, retry)
  else
    local state, ttl = adjust[kind](v, p1, p2, p3, tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]))
    if state then v, expires = state, now + ttl * 1000 end
    out[#out + 1] = pack('<bdd', state and 1 or 0, 0, 0)
  end
end
return table.concat(out)`

/** The PL/pgSQL twins as functions of the instant, with the variables the frames give them (algorithms/kinds/twins.ts). */
const twinFunctions = (p: string): string => `
CREATE FUNCTION ${p}twin_take(kind int, p1 float8, p2 float8, p3 float8, cost float8, at float8, now float8, here bool,
  a0 float8, a1 float8, a2 float8, a3 float8) RETURNS float8[] LANGUAGE plpgsql AS $f$
DECLARE n0 float8 := 0; n1 float8 := 0; n2 float8 := 0; n3 float8 := 0; nx float8 := 0; ok bool; val float8; retry float8 := 0; keep bool := false;
BEGIN
  ${dispatch('take', p)}
  IF ok OR keep THEN nx := greatest(nx, now + 1); END IF;
  RETURN ARRAY[CASE WHEN ok THEN 1 ELSE 0 END, val, retry, CASE WHEN ok OR keep THEN 1 ELSE 0 END, n0, n1, n2, n3, nx];
END $f$;
CREATE FUNCTION ${p}twin_adjust(kind int, p1 float8, p2 float8, p3 float8, amount float8, at float8, now float8, here bool,
  a0 float8, a1 float8, a2 float8, a3 float8) RETURNS float8[] LANGUAGE plpgsql AS $f$
DECLARE n0 float8 := 0; n1 float8 := 0; n2 float8 := 0; n3 float8 := 0; nx float8 := 0; ok bool := true;
BEGIN
  ${dispatch('adjust', p)}
  RETURN ARRAY[CASE WHEN ok THEN 1 ELSE 0 END, 0, 0, CASE WHEN ok THEN 1 ELSE 0 END, n0, n1, n2, n3, greatest(nx, now + 1)];
END $f$;`

let redis: Redis
let db: pg.Client
before(async () => {
  redis = new Redis(REDIS_URL)
  db = new pg.Client({ connectionString: PG_URL })
  await db.connect()
  await db.query(schemaSql(prefix, true) + twinFunctions(prefix))
})
after(async () => {
  redis.disconnect()
  await db.query(`DROP FUNCTION IF EXISTS ${prefix}twin_take; DROP FUNCTION IF EXISTS ${prefix}twin_adjust;`)
  await db.end()
  await dropPrefix(prefix)
})

const param = (r: ParamRange): fc.Arbitrary<number> =>
  r.min === r.max
    ? fc.constant(r.min)
    : r.integer
      ? fc.integer({ min: r.min, max: r.max })
      : fc.double({ min: r.min, max: r.max, noNaN: true })

/** Limits of every kind from its sample ranges, and the shapes those ranges leave out: calendar months, aligned periods, long sliding windows. */
const limits: fc.Arbitrary<Limit> = fc.oneof(
  ...[...KINDS.values()].map((k: LimitKind) => fc.tuple(...k.sample.params.map(param)).map((p) => k.limit(p))),
  fc
    .record({ limit: fc.integer({ min: 1, max: 50 }), months: fc.constantFrom(-1, -2, -3, -12) })
    .map(({ limit, months }) => counterLimit(limit, months, 0)),
  fc
    .record({
      limit: fc.integer({ min: 1, max: 50 }),
      windowS: fc.constantFrom(300, 86_400, 604_800),
      origin: fc.constantFrom(0, SUNDAY_ORIGIN_S),
    })
    .map(({ limit, windowS, origin }) => counterLimit(limit, windowS, origin)),
  fc
    .record({
      limit: fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.double({ min: 0.5, max: 100, noNaN: true })),
      windowS: fc.integer({ min: 1, max: 86_400 }),
    })
    .map(({ limit, windowS }) => slidingLimit(limit, windowS)),
)

/** Steps between operations (µs): none, within a second, within hours, up to 46 days (across months). */
const dtUs = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 1, max: 2_000_000 }),
  fc.integer({ min: 1, max: 4_000_000_000 }),
  fc.integer({ min: 1, max: 4_000_000_000_000 }),
)
const op = fc.record({
  dtUs,
  adjust: fc.boolean(),
  amount: fc.oneof(fc.integer({ min: 0, max: 6 }), fc.double({ min: 0.25, max: 4, noNaN: true }), fc.integer({ min: -5, max: -1 })),
  /** How long before the adjustment its charge was made (s): a concurrency slot is given back by it. */
  agoS: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 7200, noNaN: true })),
})

type Op = { adjust: boolean; amount: number; agoS: number }

interface Result {
  ok: boolean
  value: number
  retry: number
}

/** The TypeScript kind on the same instants, its state forgotten at expireAt as the in-process stores forget it. */
function inTypeScript(limit: Limit, times: number[], ops: Op[]): Result[] {
  const kind = limit.kind as LimitKind
  let state: unknown
  let expireAt = -Infinity
  return ops.map((o, i) => {
    const now = times[i]! / 1e6
    if (expireAt <= now) state = undefined
    if (o.adjust) {
      const r = kind.adjust(state, limit, o.amount, now, now - o.agoS)
      if (r !== undefined) [state, expireAt] = [r.state, r.expireAt]
      return { ok: r !== undefined, value: 0, retry: 0 }
    }
    const r = kind.step(state, limit, Math.abs(o.amount), now)
    if (r.allowed || r.commit) [state, expireAt] = [r.state, r.expireAt]
    return { ok: r.allowed, value: r.value, retry: r.retryAfter }
  })
}

async function inLua(limit: Limit, times: number[], ops: Op[]): Promise<Result[]> {
  const p = [0, 1, 2].map((i) => String(limit.params[i] ?? 0))
  const args = ops.flatMap((o, i) => [
    String(times[i]),
    o.adjust ? 'a' : 's',
    String(o.adjust ? o.amount : Math.abs(o.amount)),
    String(times[i]! / 1e6 - o.agoS),
  ])
  const reply = (await redis.callBuffer('EVAL', LUA, 0, String(limit.kind.id), ...p, ...args)) as Buffer
  return ops.map((_, i) => ({
    ok: reply.readInt8(i * 17) === 1,
    value: reply.readDoubleLE(i * 17 + 1),
    retry: reply.readDoubleLE(i * 17 + 9),
  }))
}

async function inPlpgsql(limit: Limit, times: number[], ops: Op[]): Promise<Result[]> {
  let cells = [0, 0, 0, 0]
  let expireAt = 0
  const out: Result[] = []
  for (const [i, o] of ops.entries()) {
    const now = times[i]! / 1e6
    const fn = o.adjust ? 'twin_adjust' : 'twin_take'
    const amount = o.adjust ? o.amount : Math.abs(o.amount)
    const { rows } = await db.query<{ r: number[] }>(`SELECT ${prefix}${fn}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) AS r`, [
      limit.kind.id,
      limit.params[0] ?? 0,
      limit.params[1] ?? 0,
      limit.params[2] ?? 0,
      amount,
      now - o.agoS,
      now,
      expireAt > now,
      ...cells,
    ])
    const r = rows[0]!.r
    if (r[3] === 1) [cells, expireAt] = [r.slice(4, 8), r[8]!]
    out.push({ ok: r[0] === 1, value: r[1] ?? 0, retry: r[2]! })
  }
  return out
}

test("every kind's Lua and PL/pgSQL twins decide as its TypeScript on any instant", async () => {
  await fc.assert(
    fc.asyncProperty(limits, fc.integer({ min: 0, max: 3e15 }), fc.array(op, { minLength: 1, maxLength: 12 }), async (limit, t0, ops) => {
      const times: number[] = []
      let t = t0
      for (const o of ops) times.push((t += o.dtUs))
      const ts = inTypeScript(limit, times, ops)
      const [lua, sql] = await Promise.all([inLua(limit, times, ops), inPlpgsql(limit, times, ops)])
      for (const [name, twin] of [
        ['lua', lua],
        ['plpgsql', sql],
      ] as const) {
        for (const [i, r] of twin.entries()) {
          // Whether an adjustment found a state to adjust depends on each store's expiry (forgetting is lossless): only later steps tell.
          if (ops[i]!.adjust) continue
          const want = ts[i]!
          const where = `${limit.kind.name} ${JSON.stringify(limit.params)}, op ${i} at ${new Date(times[i]! / 1000).toISOString()} (${JSON.stringify(ops[i])}): ${name}`
          assert.equal(r.ok, want.ok, `${where} ${r.ok ? 'allowed' : 'rejected'}`)
          assert.ok(
            Math.abs(r.value - want.value) <= 1e-9 * Math.max(1, Math.abs(want.value)),
            `${where} value ${r.value}, TypeScript ${want.value}`,
          )
          assert.equal(r.retry, want.retry, `${where} wait ${r.retry}, TypeScript ${want.retry}`)
        }
      }
    }),
    { numRuns: 300 },
  )
})
