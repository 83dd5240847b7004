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
import { meterLimit } from '../../src/algorithms/kinds/rate-meter/kind.js'
import { counterLimit, SUNDAY_ORIGIN_S } from '../../src/algorithms/kinds/window-counter/kind.js'
import type { ParamRange } from '../../src/algorithms/kinds/twins.js'
import { dispatch, schemaSql } from '../../src/store/postgres/sql.js'
import { kindsLua } from '../../src/store/redis/script.js'
import { dropPrefix, PG_URL, uniquePrefix } from '../helpers/postgres-db.js'

const REDIS_URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = uniquePrefix('twins')

/**
 * The Lua twins on given instants: ARGV kind, p1, p2, then per operation
 * the time (µs), 's' (step) or 'a' (adjust), the cost or amount, and p3 (the
 * limit's, or another in an adjustment: a held request's give-back). The state
 * is kept between operations as the take and adjust frames keep it (a reject
 * writes only when it asks to), and dropped when its TTL has run out.
 */
const LUA = `${kindsLua('\nlocal now, nowS = 0, 0')}
local kind = tonumber(ARGV[1])
local p1, p2 = tonumber(ARGV[2]), tonumber(ARGV[3])
local v, expires, out = false, 0, {}
for i = 4, #ARGV, 4 do
  now = tonumber(ARGV[i])
  local p3 = tonumber(ARGV[i + 3])
  nowS = now / 1000000
  if v and now >= expires then v = false end
  if ARGV[i + 1] == 's' then
    local ok, value, retry, state, ttl, commit = step[kind](v, p1, p2, p3, tonumber(ARGV[i + 2]))
    if ok or commit then v, expires = state, now + ttl * 1000 end
    out[#out + 1] = pack('<bdd', ok and 1 or 0, value, retry)
  else
    local state, ttl = adjust[kind](v, p1, p2, p3, tonumber(ARGV[i + 2]))
    if state then v, expires = state, now + ttl * 1000 end
    out[#out + 1] = pack('<bdd', state and 1 or 0, 0, 0)
  end
end
return table.concat(out)`

/** The PL/pgSQL twins as functions of the instant, with the variables the frames give them (algorithms/kinds/twins.ts). */
const twinFunctions = (p: string): string => `
CREATE FUNCTION ${p}twin_take(kind int, p1 float8, p2 float8, p3 float8, cost float8, now float8, here bool,
  a0 float8, a1 float8, a2 float8, a3 float8) RETURNS float8[] LANGUAGE plpgsql AS $f$
DECLARE n0 float8 := 0; n1 float8 := 0; n2 float8 := 0; n3 float8 := 0; nx float8 := 0; ok bool; val float8; retry float8 := 0; keep bool := false;
BEGIN
  ${dispatch('take', p)}
  IF ok OR keep THEN nx := greatest(nx, now + 1); END IF;
  RETURN ARRAY[CASE WHEN ok THEN 1 ELSE 0 END, val, retry, CASE WHEN ok OR keep THEN 1 ELSE 0 END, n0, n1, n2, n3, nx];
END $f$;
CREATE FUNCTION ${p}twin_adjust(kind int, p1 float8, p2 float8, p3 float8, amount float8, now float8, here bool,
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

/** Limits of every kind from its sample ranges, and the shapes those ranges leave out: calendar months, aligned periods, long sliding windows (with and without a delay). */
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
      // max_delay_ms: none, or any whole number of ms up to the schema's 30 s.
      delayMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 30_000 })),
    })
    .map(({ limit, windowS, delayMs }) => slidingLimit(limit, windowS, delayMs / 1000)),
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
})

interface Result {
  ok: boolean
  value: number
  retry: number
}

/** One operation: a step of cost |amount|, or an adjustment of amount (`held`: a held request's give-back, that many seconds before its instant). */
interface Op {
  adjust: boolean
  amount: number
  held?: number
}

/** The third parameter an operation runs with: the limit's, or a held request's give-back (kinds/sliding-window/kind.ts heldGiveBack). */
const p3Of = (limit: Limit, o: Op): number => (o.adjust && o.held !== undefined ? -o.held : (limit.params[2] ?? 0))

/**
 * The TypeScript kind on the same instants, its state forgotten at expireAt as the in-process stores
 * forget it (with `forget` false, never: for kinds whose expiry is lossless, on a clock that steps back).
 */
function inTypeScript(limit: Limit, times: number[], ops: Op[], forget = true): Result[] {
  const kind = limit.kind as LimitKind
  let state: unknown
  let expireAt = -Infinity
  return ops.map((o, i) => {
    const now = times[i]! / 1e6
    if (forget && expireAt <= now) state = undefined
    if (o.adjust) {
      const r = kind.adjust(
        state,
        o.held === undefined ? limit : kind.limit([limit.params[0]!, limit.params[1]!, p3Of(limit, o)]),
        o.amount,
        now,
      )
      if (r !== undefined) [state, expireAt] = [r.state, r.expireAt]
      return { ok: r !== undefined, value: 0, retry: 0 }
    }
    const r = kind.step(state, limit, Math.abs(o.amount), now)
    if (r.allowed || r.commit) [state, expireAt] = [r.state, r.expireAt]
    return { ok: r.allowed, value: r.value, retry: r.retryAfter }
  })
}

/** The Lua harness that never forgets a state (inTypeScript's `forget` false). */
const LUA_KEEPING = LUA.replace('if v and now >= expires then v = false end', '')

async function inLua(limit: Limit, times: number[], ops: Op[], forget = true): Promise<Result[]> {
  const p = [0, 1].map((i) => String(limit.params[i] ?? 0))
  const args = ops.flatMap((o, i) => [
    String(times[i]),
    o.adjust ? 'a' : 's',
    String(o.adjust ? o.amount : Math.abs(o.amount)),
    String(p3Of(limit, o)),
  ])
  const reply = (await redis.callBuffer('EVAL', forget ? LUA : LUA_KEEPING, 0, String(limit.kind.id), ...p, ...args)) as Buffer
  return ops.map((_, i) => ({
    ok: reply.readInt8(i * 17) === 1,
    value: reply.readDoubleLE(i * 17 + 1),
    retry: reply.readDoubleLE(i * 17 + 9),
  }))
}

async function inPlpgsql(limit: Limit, times: number[], ops: Op[], forget = true): Promise<Result[]> {
  let cells = [0, 0, 0, 0]
  let expireAt = forget ? 0 : -Infinity
  let stored = false
  const out: Result[] = []
  for (const [i, o] of ops.entries()) {
    const now = times[i]! / 1e6
    const fn = o.adjust ? 'twin_adjust' : 'twin_take'
    const amount = o.adjust ? o.amount : Math.abs(o.amount)
    const { rows }: pg.QueryResult<{ r: number[] }> = await db.query<{ r: number[] }>(
      `SELECT ${prefix}${fn}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS r`,
      [limit.kind.id, limit.params[0] ?? 0, limit.params[1] ?? 0, p3Of(limit, o), amount, now, forget ? expireAt > now : stored, ...cells],
    )
    const r: number[] = rows[0]!.r
    if (r[3] === 1) [cells, expireAt, stored] = [r.slice(4, 8), r[8]!, true]
    out.push({ ok: r[0] === 1, value: r[1] ?? 0, retry: r[2]! })
  }
  return out
}

/** Runs `ops` from `t0` (µs) in the three languages and requires the TypeScript's outcomes of the Lua and PL/pgSQL twins. */
async function sameInEveryLanguage(limit: Limit, t0: number, ops: (Op & { dtUs: number })[], forget = true): Promise<void> {
  const times: number[] = []
  let t = t0
  for (const o of ops) times.push((t += o.dtUs))
  const ts = inTypeScript(limit, times, ops, forget)
  const [lua, sql] = await Promise.all([inLua(limit, times, ops, forget), inPlpgsql(limit, times, ops, forget)])
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
}

test("every kind's Lua and PL/pgSQL twins decide as its TypeScript on any instant", async () => {
  await fc.assert(
    fc.asyncProperty(limits, fc.integer({ min: 0, max: 3e15 }), fc.array(op, { minLength: 1, maxLength: 12 }), (limit, t0, ops) =>
      sameInEveryLanguage(limit, t0, ops),
    ),
    { numRuns: 300 },
  )
})

/**
 * A clock that steps back (another database node's, a fail-over replica's, up to a couple of
 * minutes): the window counters and the rate meter keep counting in the window or minute a later
 * clock stored, alike in the three languages. Their expiry is lossless, so states are kept here
 * (each store's own expiry floor would otherwise decide what a step back finds).
 */
test('window counter and rate meter twins decide as their TypeScript when the clock steps back', async () => {
  const backLimits: fc.Arbitrary<Limit> = fc.oneof(
    fc.record({ limit: fc.integer({ min: 1, max: 20 }), months: fc.constantFrom(-1, -3) }).map((r) => counterLimit(r.limit, r.months, 0)),
    fc
      .record({ limit: fc.integer({ min: 1, max: 20 }), windowS: fc.constantFrom(1, 60, 300), origin: fc.constantFrom(0, SUNDAY_ORIGIN_S) })
      .map((r) => counterLimit(r.limit, r.windowS, r.origin)),
    fc.record({ threshold: fc.integer({ min: 2, max: 30 }), openS: fc.constantFrom(1, 30) }).map((r) => meterLimit(r.threshold, r.openS)),
  )
  const back = fc.record({
    dtUs: fc.oneof(fc.integer({ min: -2_000_000, max: 2_000_000 }), fc.integer({ min: -150_000_000, max: 150_000_000 })),
    adjust: fc.boolean(),
    amount: fc.oneof(fc.integer({ min: 0, max: 6 }), fc.integer({ min: -3, max: -1 })),
  })
  // Boundaries are where a step back matters: start within 2 s of a minute, a month or a window.
  const t0 = fc
    .tuple(fc.integer({ min: 0, max: 600 }), fc.integer({ min: -2_000_000, max: 2_000_000 }))
    .map(([m, d]) => Date.UTC(2024, m % 24, 1) * 1000 + m * 60e6 + d)
  await fc.assert(
    fc.asyncProperty(backLimits, t0, fc.array(back, { minLength: 2, maxLength: 14 }), (limit, start, ops) =>
      sameInEveryLanguage(limit, start, ops, false),
    ),
    { numRuns: 300 },
  )
})

/**
 * Each give-back of `ops` as the gateway sends it, from the TypeScript's own outcomes: an adjustment
 * of the latest held request's cost (a step allowed below zero, not given back yet) with the
 * seconds it still had to wait then; a plain adjustment of `amount` when none is held.
 */
function resolveGiveBacks(limit: Limit, t0: number, ops: (Op & { dtUs: number; giveBack: boolean })[]): (Op & { dtUs: number })[] {
  const kind = limit.kind as LimitKind
  let state: unknown
  let expireAt = -Infinity
  let t = t0
  let held: { at: number; wait: number; cost: number } | undefined
  return ops.map(({ giveBack, ...o }) => {
    const now = (t += o.dtUs) / 1e6
    if (expireAt <= now) state = undefined
    const op: Op & { dtUs: number } =
      giveBack && held ? { ...o, adjust: true, amount: held.cost, held: Math.max(0, held.wait - (now - held.at)) } : o
    if (giveBack) held = undefined
    if (op.adjust) {
      const r = kind.adjust(
        state,
        op.held === undefined ? limit : kind.limit([limit.params[0]!, limit.params[1]!, -op.held]),
        op.amount,
        now,
      )
      if (r !== undefined) [state, expireAt] = [r.state, r.expireAt]
    } else {
      const r = kind.step(state, limit, Math.abs(op.amount), now)
      if (r.allowed) [state, expireAt] = [r.state, r.expireAt]
      if (r.allowed && r.value < -1e-9) held = { at: now, wait: r.retryAfter, cost: Math.abs(op.amount) }
    }
    return op
  })
}

test('the same for sliding windows with a delay, over their limit within a window or two: held in this window or the next, refused past both, held requests given back', async () => {
  const held = fc
    .record({
      limit: fc.oneof(fc.integer({ min: 1, max: 6 }), fc.double({ min: 0.5, max: 6, noNaN: true })),
      windowS: fc.integer({ min: 1, max: 3 }),
      delayMs: fc.integer({ min: 1, max: 6000 }),
    })
    .map(({ limit, windowS, delayMs }) => slidingLimit(limit, windowS, delayMs / 1000))
  // Requests a few at a time, up to 1.5 s apart: the windows fill, turn, and hold; now and then the latest held one is given back.
  const burst = fc.record({
    dtUs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 1_500_000 })),
    adjust: fc.oneof({ arbitrary: fc.constant(false), weight: 5 }, { arbitrary: fc.constant(true), weight: 1 }),
    giveBack: fc.oneof({ arbitrary: fc.constant(false), weight: 3 }, { arbitrary: fc.constant(true), weight: 1 }),
    amount: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.double({ min: 0.25, max: 2, noNaN: true }), fc.integer({ min: -2, max: -1 })),
  })
  await fc.assert(
    fc.asyncProperty(held, fc.integer({ min: 0, max: 3e15 }), fc.array(burst, { minLength: 1, maxLength: 16 }), (limit, t0, ops) =>
      sameInEveryLanguage(limit, t0, resolveGiveBacks(limit, t0, ops)),
    ),
    { numRuns: 200 },
  )
})
