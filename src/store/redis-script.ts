/**
 * The Lua twins of algorithms/token-bucket.ts, run inside Redis so that all
 * limits of one request (on one node / slot) are checked and committed in a
 * single atomic step. The clock is the server's (`TIME`): gateways with skewed
 * clocks cannot change the refill, and a bucket's time never moves backwards.
 *
 * Numbers cross the boundary as strings formatted with %.17g: Redis turns a
 * Lua number reply into an integer (truncating) and formats redis.call()
 * number arguments with only 14 digits, both of which would lose tokens.
 *
 * Bucket state: one string `"<tokens> <last>"` (last in whole microseconds of
 * server time, so elapsed time is exact) written with SET … PX = the time
 * until the bucket is full again (at least 1 s), after which forgetting it is
 * lossless: an absent bucket reads as full. A string and one SET cost Redis
 * about a third less per request than a hash with HSET + PEXPIRE (each
 * redis.call from Lua has a fixed cost of its own).
 *
 * Float noise is handled as in algorithms/token-bucket.ts: token counts within
 * 1e-9 of a whole number snap to it, and waits subtract 1e-9 before rounding up.
 */

/**
 * KEYS[i]: bucket key of check i. ARGV: 4 per check: rate, burst, cost, group
 * (0 enforce, 1 shadow). Per group, evaluation stops at the first reject and
 * nothing of a rejected group is written. A check sees the state staged by an
 * earlier allowed check of the same key in this call (duplicate keys).
 * Reply: 3 per check: status (1 allowed, 0 rejected, -1 not evaluated),
 * tokens (string), retry-after seconds (integer).
 */
export const TAKE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local out = {}
local stTokens, stLast = {}, {}
local latest = nil
if n > 1 then latest = {} end
local rejEnforce, rejShadow = false, false
local floor, abs = math.floor, math.abs
for i = 1, n do
  local a = i * 4 - 4
  local o = i * 3 - 3
  local shadow = ARGV[a + 4] == '1'
  if (shadow and rejShadow) or (not shadow and rejEnforce) then
    out[o + 1] = -1
    out[o + 2] = ''
    out[o + 3] = 0
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
      if v then
        local sp = string.find(v, ' ', 1, true)
        if sp then
          tokens = tonumber(string.sub(v, 1, sp - 1))
          last = tonumber(string.sub(v, sp + 1))
        end
      end
    end
    if tokens == nil or last == nil then
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
      stTokens[i] = tokens
      stLast[i] = last
      if latest then latest[key] = i end
      out[o + 1] = 1
      out[o + 2] = string.format('%.17g', tokens)
      out[o + 3] = 0
    else
      if shadow then rejShadow = true else rejEnforce = true end
      local wait = math.ceil((cost - tokens) / rate - 1e-9)
      if wait < 1 then wait = 1 end
      out[o + 1] = 0
      out[o + 2] = string.format('%.17g', tokens)
      out[o + 3] = wait
    end
  end
end
for i = 1, n do
  local tokens = stTokens[i]
  if tokens ~= nil then
    local a = i * 4 - 4
    local shadow = ARGV[a + 4] == '1'
    if not ((shadow and rejShadow) or (not shadow and rejEnforce)) then
      local last = stLast[i]
      local ttl = math.ceil((last - now) / 1000 + (tonumber(ARGV[a + 2]) - tokens) / tonumber(ARGV[a + 1]) * 1000)
      if ttl < 1000 then ttl = 1000 end
      redis.call('SET', KEYS[i], string.format('%.17g %.17g', tokens, last), 'PX', ttl)
    end
  end
end
return out
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
  local sp = v and string.find(v, ' ', 1, true)
  if sp then
    local tokens = tonumber(string.sub(v, 1, sp - 1))
    local last = tonumber(string.sub(v, sp + 1))
    if now > last then
      tokens = tokens + (now - last) / 1000000 * rate
      last = now
    end
    tokens = math.min(burst, tokens + amount)
    local ttl = math.ceil((last - now) / 1000 + (burst - tokens) / rate * 1000)
    if ttl < 1000 then ttl = 1000 end
    redis.call('SET', key, string.format('%.17g %.17g', tokens, last), 'PX', ttl)
  end
end
return 1
`
