/**
 * The Redis scripts: the take and adjust frames around the limit kinds' Lua
 * twins (algorithms/kinds/<kind>/redis.ts), run inside Redis so that all
 * limits of one request (on one node / slot) are checked and committed in a
 * single atomic step. The clock is the server's (`TIME`): gateways with skewed
 * clocks cannot change the refill, and a bucket's time never moves backwards.
 *
 * Both scripts are assembled from the kind table (algorithms/kinds/index.ts)
 * when a store opens: the prelude, then one step / adjust function per kind
 * id. A kind's state is struct-packed doubles (exact, where text would need
 * %.17g, and a fifth of the cost of formatting and parsing text in Redis),
 * written with PSETEX for as long as keeping it carries information (at
 * least 1 s, at most 1e13 ms so PSETEX gets an integer).
 *
 * Reply: the same packing, 17 bytes per check (see takeLua), so neither
 * side formats or parses numbers as text. Redis turns a Lua number reply into
 * an integer (truncating), which is why tokens cannot travel as numbers.
 *
 * Float noise is handled as in the TypeScript kinds: counts within EPSILON
 * of a whole number snap to it, and waits subtract EPSILON before rounding up.
 */
import { EPSILON } from '../../algorithms/algorithm.js'
import { KINDS, kindsRevision } from '../../algorithms/kinds/index.js'

/** Bytes per check in the take script's reply: int8 status, double value, double retry-after seconds. */
export const TAKE_REPLY_BYTES = 17

/** ARGV entries per check in the take script: kind id, PARAMS parameters, cost, group. */
const TAKE_ARGS_PER_CHECK = 6

/**
 * What every kind's Lua twin sees (algorithms/kinds/twins.ts): the server
 * clock, read once per call (`now` in µs, `nowS` in seconds), struct
 * packing, and the helpers the kinds share. Then one step / adjust function
 * per kind id, from the kind table, each made on the first check of its kind
 * in the call (`step[id]` looks it up): a script runs its whole body on every
 * call, and making every kind's functions every time cost each call more
 * with each kind added (docs/benchmarks.md, "Sliding windows").
 */
const PRELUDE = `
local pack, unpack, floor, abs, ceil = struct.pack, struct.unpack, math.floor, math.abs, math.ceil
local function snap(x)
  local r = floor(x + 0.5)
  if abs(x - r) < ${EPSILON} then return r end
  return x
end
local function ttlOf(ms)
  if ms < 1000 then return 1000 elseif ms > 1e13 then return 1e13 end
  return ceil(ms)
end
local function secondsTo(finish)
  local s = ceil(finish - nowS - ${EPSILON})
  if s < 1 then return 1 end
  return s
end
local make, step, adjust = {}, {}, {}
local function build(id)
  local s, a = make[id]()
  step[id], adjust[id] = s, a
  return s, a
end
setmetatable(step, { __index = function(_, id) return (build(id)) end })
setmetatable(adjust, { __index = function(_, id) local _, a = build(id) return a end })
`

/** The server's clock, read once per call. */
const SERVER_CLOCK = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nowS = now / 1000000`

/**
 * The prelude and every kind of the table, each kind's twin in a function of
 * its own (its helpers stay its own), run when the call first needs the
 * kind. `clock` declares `now` and `nowS`: the server's, or
 * (test/property/kind-twins.test.ts) instants the caller sets.
 */
export function kindsLua(clock = SERVER_CLOCK): string {
  let lua = clock + PRELUDE
  for (const [id, kind] of KINDS) lua += `-- ${id}: ${kind.name}\nmake[${id}] = function()${kind.lua}\nend\n`
  return lua
}

/**
 * The read-backs of a rejected group's checks that carry a mode (store.ts OnReject): which are
 * charged is decided on the counters as the call left them (`over`: the step of its cost alone
 * rejects), then they are charged by their kind's adjust in order, then read again (a step of
 * cost 0, nothing written).
 */
const READ_BACK = `
  local reads, charged = {}, {}
  local function args(i)
    local a = (i - 1) * ${TAKE_ARGS_PER_CHECK}
    return step[tonumber(ARGV[a + 1])], adjust[tonumber(ARGV[a + 1])], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  end
  local function read(i, v)
    local st, _, p1, p2, p3 = args(i)
    local ok, value, retry = st(v, p1, p2, p3, 0)
    reads[i] = pack('<bdd', ok and 1 or 0, value, retry)
  end
  for i = 1, n do
    local gv = tonumber(ARGV[i * ${TAKE_ARGS_PER_CHECK}])
    local m = floor(gv / 2)
    if m > 0 and rejected[gv % 2 + 1] then
      local v = redis.call('GET', KEYS[i])
      local st, _, p1, p2, p3, cost = args(i)
      if m == 2 or (m == 3 and not st(v, p1, p2, p3, cost)) then charged[#charged + 1] = i else read(i, v) end
    end
  end
  for _, i in ipairs(charged) do
    local _, adj, p1, p2, p3, cost = args(i)
    local state, ttl = adj(redis.call('GET', KEYS[i]), p1, p2, p3, -cost)
    if state then redis.call('PSETEX', KEYS[i], ttl, state) end
  end
  for _, i in ipairs(charged) do read(i, redis.call('GET', KEYS[i])) end
  for i = 1, n do reply[n + i] = reads[i] or pack('<bdd', -1, 0, 0) end`

/** ARGV group values past 1 carry a check's OnReject (store.ts) as group + 2 × mode. */
export const ON_REJECT_MODE = { read: 1, charge: 2, over: 3 } as const

/**
 * KEYS[i]: counter key of check i. ARGV: TAKE_ARGS_PER_CHECK per check: kind,
 * p1, p2, p3, cost, group (0 enforce, 1 shadow; plus 2 × ON_REJECT_MODE). A reject that asks for it
 * (a breaker opening) writes its state at once, whatever the group does. Per group, evaluation stops at the
 * first reject and nothing of a rejected group is written. A check sees the
 * state staged by an earlier allowed check of the same key in this call
 * (duplicate keys). Reply: per check struct.pack('<bdd', status, value,
 * retryAfter); status 1 allowed, 0 rejected, -1 not evaluated, joined once
 * at the end (appending to a Lua string copies it: n checks would copy n²/2
 * records). Duplicate keys are found in a table by key, so a call of n checks
 * costs the script n steps. A single check (the common case) commits at once
 * and stages nothing. When a check carries an OnReject mode and a group
 * rejected, n more records follow: the read-backs of READ_BACK (status -1
 * where none).
 */
const TAKE = `
local n = #KEYS
local reply = {}
local staged, stState, stTtl
if n > 1 then staged, stState, stTtl = {}, {}, {} end
local rejected = { false, false }
local flagged = false
for i = 1, n do
  local a = (i - 1) * ${TAKE_ARGS_PER_CHECK}
  local gv = tonumber(ARGV[a + 6])
  local g = gv % 2 + 1
  if gv > 1 then flagged = true end
  if rejected[g] then
    reply[i] = pack('<bdd', -1, 0, 0)
  else
    local key = KEYS[i]
    local v = staged and staged[key]
    if not v then v = redis.call('GET', key) end
    local ok, value, retry, state, ttl, commit = step[tonumber(ARGV[a + 1])](v, tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]))
    if ok then
      if n == 1 then
        redis.call('PSETEX', key, ttl, state)
      else
        staged[key], stState[i], stTtl[i] = state, state, ttl
      end
      reply[i] = pack('<bdd', 1, value, retry)
    else
      if commit then redis.call('PSETEX', key, ttl, state) end
      rejected[g] = true
      reply[i] = pack('<bdd', 0, value, retry)
    end
  end
end
if n > 1 then
  for i = 1, n do
    if stState[i] and not rejected[tonumber(ARGV[i * ${TAKE_ARGS_PER_CHECK}]) % 2 + 1] then
      redis.call('PSETEX', KEYS[i], stTtl[i], stState[i])
    end
  end
end
if flagged and (rejected[1] or rejected[2]) then${READ_BACK}
end
return table.concat(reply)
`

/** ARGV entries per key in the adjust script: kind id, PARAMS parameters, amount, at. */
const ADJUST_ARGS_PER_KEY = 6

/**
 * Adjust counters already charged (LLM settlement; on a cluster, refunds of
 * slots that committed for a request another slot rejected). KEYS[i]: counter
 * key; ARGV: kind, p1, p2, p3, amount (> 0 gives back, < 0 charges more), at
 * (when the adjusted charge was made, epoch seconds; −1: now). Each
 * kind refreshes its state to now first and never gives back past its bound;
 * an absent counter has nothing to give back. Replies '' (the script caller
 * takes bytes).
 */
const ADJUST = `
for i = 1, #KEYS do
  local a = (i - 1) * ${ADJUST_ARGS_PER_KEY}
  local key = KEYS[i]
  local at = tonumber(ARGV[a + 6])
  if at < 0 then at = nowS end
  local state, ttl = adjust[tonumber(ARGV[a + 1])](redis.call('GET', key), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), at)
  if state then redis.call('PSETEX', key, ttl, state) end
end
return ''
`

let built = -1
let scripts = { take: '', adjust: '' }

/** The take and adjust scripts for the kinds in the table now (assembled once per change of the table). */
export function redisScripts(): { readonly take: string; readonly adjust: string } {
  if (built !== kindsRevision()) {
    const kinds = kindsLua()
    scripts = { take: kinds + TAKE, adjust: kinds + ADJUST }
    built = kindsRevision()
  }
  return scripts
}
