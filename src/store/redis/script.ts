/**
 * The Lua twins of the limit kinds (algorithms/), run inside Redis so that all
 * limits of one request (on one node / slot) are checked and committed in a
 * single atomic step. The clock is the server's (`TIME`): gateways with skewed
 * clocks cannot change the refill, and a bucket's time never moves backwards.
 *
 * One function per limit kind (KINDS_LUA, indexed by the kind's id), shared
 * by the take and adjust scripts. Bucket state (kind 1): 16 bytes, two little-endian IEEE doubles `<tokens><last>`
 * (struct.pack('<dd'); last in whole microseconds of server time, so elapsed
 * time is exact), written with PSETEX = the time until the bucket is full
 * again (at least 1 s, at most 1e13 ms so PSETEX gets an integer), after which forgetting it is lossless: an absent
 * bucket reads as full. Doubles are exact (text would need %.17g), and
 * packing costs Redis a fifth of formatting and parsing text; docs/stores.md
 * ("Redis") shows how to read a bucket by hand.
 *
 * Reply: the same packing, 17 bytes per check (see TAKE_LUA), so neither
 * side formats or parses numbers as text. Redis turns a Lua number reply into
 * an integer (truncating), which is why tokens cannot travel as numbers.
 *
 * Float noise is handled as in algorithms/token-bucket.ts: token counts within
 * EPSILON of a whole number snap to it, and waits subtract EPSILON before rounding up.
 */
import { EPSILON } from '../../algorithms/algorithm.js'

/** Bytes per check in TAKE_LUA's reply: int8 status, double value, double retry-after seconds. */
export const TAKE_REPLY_BYTES = 17

/** ARGV entries per check in TAKE_LUA: kind id, PARAMS parameters, cost, group. */
const TAKE_ARGS_PER_CHECK = 6

/**
 * Per kind id: step(v, p1, p2, p3, cost) → allowed, value, retryAfter, new
 * state, ttl ms, commit-on-reject; and adjust(v, p1, p2, p3, amount) → new
 * state, ttl ms (nil: nothing to adjust). `v` is the stored string or false;
 * `now` is server time in µs, `nowS` in seconds. Same maths as
 * algorithms/token-bucket.ts (1), window-counter.ts (2), rate-meter.ts (3).
 */
const KINDS_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nowS = now / 1000000
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
local step, adjust = {}, {}
-- 1: token bucket, state <tokens><last µs>
local function bucket(v, rate, burst)
  local tokens, last
  if v and #v == 16 then tokens, last = unpack('<dd', v) end
  if tokens == nil then return burst, now end
  if now > last then
    tokens = snap(tokens + (now - last) / 1000000 * rate)
    last = now
  end
  if tokens > burst then tokens = burst end
  return tokens, last
end
step[1] = function(v, rate, burst, _, cost)
  local tokens, last = bucket(v, rate, burst)
  if cost <= burst and tokens >= cost then
    tokens = snap(tokens - cost)
    return true, tokens, 0, pack('<dd', tokens, last), ttlOf((last - now) / 1000 + (burst - tokens) / rate * 1000)
  end
  local wait = ceil((cost - tokens) / rate - ${EPSILON})
  if wait < 1 then wait = 1 end
  return false, tokens, wait
end
adjust[1] = function(v, rate, burst, _, amount)
  if not v and amount >= 0 then return nil end
  local tokens, last = bucket(v, rate, burst)
  tokens = snap(tokens + amount)
  if tokens > burst then tokens = burst end
  return pack('<dd', tokens, last), ttlOf((last - now) / 1000 + (burst - tokens) / rate * 1000)
end
-- 2: window counter, state <count><window start s>
local function window(v, windowS, origin)
  local count, start
  if v and #v == 16 then count, start = unpack('<dd', v) end
  if origin >= 0 then
    local s = floor((nowS - origin) / windowS) * windowS + origin
    if start ~= s then count = 0 end
    return count, s
  end
  if count == nil or nowS >= start + windowS then return 0, nowS end
  return count, start
end
step[2] = function(v, limit, windowS, origin, cost)
  local count, start = window(v, windowS, origin)
  local finish = start + windowS
  local nxt = count + cost
  if nxt > limit + ${EPSILON} then return false, count, secondsTo(finish) end
  return true, nxt, secondsTo(finish), pack('<dd', nxt, start), ttlOf((finish - nowS) * 1000)
end
adjust[2] = function(v, limit, windowS, origin, amount)
  local count, start = window(v, windowS, origin)
  if count == 0 and amount >= 0 then return nil end
  count = count - amount
  if count < 0 then count = 0 end
  return pack('<dd', count, start), ttlOf((start + windowS - nowS) * 1000)
end
-- 3: rate meter, state <prev><cur><minute s><open until s>
step[3] = function(v, threshold, openS, _, cost)
  local prev, cur, minute, openUntil
  if v and #v == 32 then prev, cur, minute, openUntil = unpack('<dddd', v) end
  if openUntil and openUntil > nowS then return false, threshold, secondsTo(openUntil) end
  local m = floor(nowS / 60) * 60
  if minute == m then
  elseif minute == m - 60 then prev, cur = cur, 0
  else prev, cur = 0, 0 end
  local rate = prev * (1 - (nowS - m) / 60) + cur + cost
  if rate >= threshold - ${EPSILON} then
    local untilS = nowS + openS
    local keep = untilS
    if m + 120 > keep then keep = m + 120 end
    local wait = ceil(openS - ${EPSILON})
    if wait < 1 then wait = 1 end
    return false, rate, wait, pack('<dddd', 0, 0, m, untilS), ttlOf((keep - nowS) * 1000), true
  end
  return true, rate, 0, pack('<dddd', prev, cur + cost, m, 0), ttlOf((m + 120 - nowS) * 1000)
end
adjust[3] = function(v, threshold, openS, _, amount)
  if not (v and #v == 32) then return nil end
  local prev, cur, minute, openUntil = unpack('<dddd', v)
  if minute ~= floor(nowS / 60) * 60 then return nil end
  cur = cur - amount
  if cur < 0 then cur = 0 end
  local keep = minute + 120
  if openUntil > keep then keep = openUntil end
  return pack('<dddd', prev, cur, minute, openUntil), ttlOf((keep - nowS) * 1000)
end
`

/**
 * KEYS[i]: counter key of check i. ARGV: TAKE_ARGS_PER_CHECK per check: kind,
 * p1, p2, p3, cost, group (0 enforce, 1 shadow). A reject that asks for it
 * (a breaker opening) writes its state at once, whatever the group does. Per group, evaluation stops at the
 * first reject and nothing of a rejected group is written. A check sees the
 * state staged by an earlier allowed check of the same key in this call
 * (duplicate keys). Reply: per check struct.pack('<bdd', status, value,
 * retryAfter); status 1 allowed, 0 rejected, -1 not evaluated, joined once
 * at the end (appending to a Lua string copies it: n checks would copy n²/2
 * records). Duplicate keys are found in a table by key, so a call of n checks
 * costs the script n steps. A single check (the common case) commits at once
 * and stages nothing.
 */
export const TAKE_LUA = `${KINDS_LUA}
local n = #KEYS
local reply = {}
local staged, stState, stTtl
if n > 1 then staged, stState, stTtl = {}, {}, {} end
local rejected = { false, false }
for i = 1, n do
  local a = (i - 1) * ${TAKE_ARGS_PER_CHECK}
  local g = ARGV[a + 6] == '1' and 2 or 1
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
    if stState[i] and not rejected[ARGV[i * ${TAKE_ARGS_PER_CHECK}] == '1' and 2 or 1] then
      redis.call('PSETEX', KEYS[i], stTtl[i], stState[i])
    end
  end
end
return table.concat(reply)
`

/** ARGV entries per key in ADJUST_LUA: kind id, PARAMS parameters, amount. */
const ADJUST_ARGS_PER_KEY = 5

/**
 * Adjust counters already charged (LLM settlement; on a cluster, refunds of
 * slots that committed for a request another slot rejected). KEYS[i]: counter
 * key; ARGV: kind, p1, p2, p3, amount (> 0 gives back, < 0 charges more). Each
 * kind refreshes its state to now first and never gives back past its bound;
 * an absent counter has nothing to give back. Replies '' (the script caller
 * takes bytes).
 */
export const ADJUST_LUA = `${KINDS_LUA}
for i = 1, #KEYS do
  local a = (i - 1) * ${ADJUST_ARGS_PER_KEY}
  local key = KEYS[i]
  local state, ttl = adjust[tonumber(ARGV[a + 1])](redis.call('GET', key), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]))
  if state then redis.call('PSETEX', key, ttl, state) end
end
return ''
`
