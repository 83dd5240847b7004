/**
 * The Lua twins of algorithms/token-bucket.ts, run inside Redis so that all
 * limits of one request (on one node / slot) are checked and committed in a
 * single atomic step. The clock is the server's (`TIME`): gateways with skewed
 * clocks cannot change the refill, and a bucket's time never moves backwards.
 *
 * Bucket state: 16 bytes, two little-endian IEEE doubles `<tokens><last>`
 * (struct.pack('<dd'); last in whole microseconds of server time, so elapsed
 * time is exact), written with PSETEX = the time until the bucket is full
 * again (at least 1 s, at most 1e13 ms so PSETEX gets an integer), after which forgetting it is lossless: an absent
 * bucket reads as full. Doubles are exact (text would need %.17g), and
 * packing costs Redis a fifth of formatting and parsing text; README shows
 * how to read a bucket by hand.
 *
 * Reply: the same packing, 17 bytes per check (see TAKE_LUA), so neither
 * side formats or parses numbers as text. Redis turns a Lua number reply into
 * an integer (truncating), which is why tokens cannot travel as numbers.
 *
 * Float noise is handled as in algorithms/token-bucket.ts: token counts within
 * 1e-9 of a whole number snap to it, and waits subtract 1e-9 before rounding up.
 */

/** Bytes per check in TAKE_LUA's reply: int8 status, double tokens, double retry-after seconds. */
export const TAKE_REPLY_BYTES = 17

/**
 * KEYS[i]: bucket key of check i. ARGV: 4 per check: rate, burst, cost, group
 * (0 enforce, 1 shadow). Per group, evaluation stops at the first reject and
 * nothing of a rejected group is written. A check sees the state staged by an
 * earlier allowed check of the same key in this call (duplicate keys).
 * Reply: per check struct.pack('<bdd', status, tokens, retryAfter); status 1
 * allowed, 0 rejected, -1 not evaluated. A single check (the common case)
 * commits at once and allocates no tables.
 */
export const TAKE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local pack, unpack, floor, abs = struct.pack, struct.unpack, math.floor, math.abs
local reply = ''
local stTokens, stLast, latest
if n > 1 then stTokens, stLast, latest = {}, {}, {} end
local rejEnforce, rejShadow = false, false
for i = 1, n do
  local a = i * 4 - 4
  local shadow = ARGV[a + 4] == '1'
  if (shadow and rejShadow) or (not shadow and rejEnforce) then
    reply = reply .. pack('<bdd', -1, 0, 0)
  else
    local rate = tonumber(ARGV[a + 1])
    local burst = tonumber(ARGV[a + 2])
    local cost = tonumber(ARGV[a + 3])
    local key = KEYS[i]
    local tokens, last
    local j = latest and latest[key]
    if j then
      tokens = stTokens[j]
      last = stLast[j]
    else
      local v = redis.call('GET', key)
      if v and #v == 16 then tokens, last = unpack('<dd', v) end
    end
    if tokens == nil then
      tokens = burst
      last = now
    else
      if now > last then
        tokens = tokens + (now - last) / 1000000 * rate
        local r = floor(tokens + 0.5)
        if abs(tokens - r) < 1e-9 then tokens = r end
        last = now
      end
      if tokens > burst then tokens = burst end
    end
    if cost <= burst and tokens >= cost then
      tokens = tokens - cost
      local r = floor(tokens + 0.5)
      if abs(tokens - r) < 1e-9 then tokens = r end
      if n == 1 then
        local ttl = math.ceil((last - now) / 1000 + (burst - tokens) / rate * 1000)
        if ttl < 1000 then ttl = 1000 elseif ttl > 1e13 then ttl = 1e13 end
        redis.call('PSETEX', key, ttl, pack('<dd', tokens, last))
      else
        stTokens[i] = tokens
        stLast[i] = last
        latest[key] = i
      end
      reply = reply .. pack('<bdd', 1, tokens, 0)
    else
      if shadow then rejShadow = true else rejEnforce = true end
      local wait = math.ceil((cost - tokens) / rate - 1e-9)
      if wait < 1 then wait = 1 end
      reply = reply .. pack('<bdd', 0, tokens, wait)
    end
  end
end
if n > 1 then
  for i = 1, n do
    local tokens = stTokens[i]
    if tokens ~= nil then
      local a = i * 4 - 4
      local shadow = ARGV[a + 4] == '1'
      if not ((shadow and rejShadow) or (not shadow and rejEnforce)) then
        local last = stLast[i]
        local ttl = math.ceil((last - now) / 1000 + (tonumber(ARGV[a + 2]) - tokens) / tonumber(ARGV[a + 1]) * 1000)
        if ttl < 1000 then ttl = 1000 elseif ttl > 1e13 then ttl = 1e13 end
        redis.call('PSETEX', KEYS[i], ttl, pack('<dd', tokens, last))
      end
    end
  end
end
return reply
`

/**
 * Cluster only: give back tokens taken on one slot when a limit on another
 * slot rejected the request. KEYS[i]: bucket key; ARGV: 3 per key: rate,
 * burst, amount. The bucket is refilled to now first and never exceeds
 * burst; an absent bucket is already full, so there is nothing to return.
 */
export const REFUND_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
for i = 1, #KEYS do
  local a = (i - 1) * 3
  local rate = tonumber(ARGV[a + 1])
  local burst = tonumber(ARGV[a + 2])
  local amount = tonumber(ARGV[a + 3])
  local key = KEYS[i]
  local v = redis.call('GET', key)
  if v and #v == 16 then
    local tokens, last = struct.unpack('<dd', v)
    if now > last then
      tokens = tokens + (now - last) / 1000000 * rate
      last = now
    end
    tokens = math.min(burst, tokens + amount)
    local ttl = math.ceil((last - now) / 1000 + (burst - tokens) / rate * 1000)
    if ttl < 1000 then ttl = 1000 elseif ttl > 1e13 then ttl = 1e13 end
    redis.call('PSETEX', key, ttl, struct.pack('<dd', tokens, last))
  end
end
return 1
`
