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
 * Bucket state: a hash `{ tokens, last }` (last in seconds, server time) with
 * a PEXPIRE of the time until the bucket is full again (at least 1 s), after
 * which forgetting it is lossless: an absent bucket reads as full.
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
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local n = #KEYS
local out = {}
local stTokens, stLast, latest = {}, {}, {}
local rejected = { false, false }
local groups = {}
for i = 1, n do
  local a = (i - 1) * 4
  local rate = tonumber(ARGV[a + 1])
  local burst = tonumber(ARGV[a + 2])
  local cost = tonumber(ARGV[a + 3])
  local g = tonumber(ARGV[a + 4]) + 1
  groups[i] = g
  local o = (i - 1) * 3
  if rejected[g] then
    out[o + 1] = -1
    out[o + 2] = ''
    out[o + 3] = 0
  else
    local key = KEYS[i]
    local tokens, last
    local j = latest[key]
    if j then
      tokens = stTokens[j]
      last = stLast[j]
    else
      local s = redis.call('HMGET', key, 'tokens', 'last')
      if s[1] and s[2] then
        tokens = tonumber(s[1])
        last = tonumber(s[2])
      end
    end
    if tokens == nil or last == nil then
      tokens = burst
      last = now
    else
      local elapsed = now - last
      if elapsed < 0 then elapsed = 0 end
      tokens = math.min(burst, tokens + elapsed * rate)
      if now > last then last = now end
    end
    if cost <= burst and tokens >= cost then
      tokens = tokens - cost
      stTokens[i] = tokens
      stLast[i] = last
      latest[key] = i
      out[o + 1] = 1
      out[o + 2] = string.format('%.17g', tokens)
      out[o + 3] = 0
    else
      rejected[g] = true
      local wait = math.ceil((cost - tokens) / rate)
      if wait < 1 then wait = 1 end
      out[o + 1] = 0
      out[o + 2] = string.format('%.17g', tokens)
      out[o + 3] = wait
    end
  end
end
for i = 1, n do
  local tokens = stTokens[i]
  if tokens ~= nil and not rejected[groups[i]] then
    local a = (i - 1) * 4
    local rate = tonumber(ARGV[a + 1])
    local burst = tonumber(ARGV[a + 2])
    local key = KEYS[i]
    local last = stLast[i]
    redis.call('HSET', key, 'tokens', string.format('%.17g', tokens), 'last', string.format('%.17g', last))
    local ttl = math.ceil((last - now + (burst - tokens) / rate) * 1000)
    if ttl < 1000 then ttl = 1000 end
    redis.call('PEXPIRE', key, ttl)
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
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
for i = 1, #KEYS do
  local a = (i - 1) * 3
  local rate = tonumber(ARGV[a + 1])
  local burst = tonumber(ARGV[a + 2])
  local amount = tonumber(ARGV[a + 3])
  local key = KEYS[i]
  local s = redis.call('HMGET', key, 'tokens', 'last')
  if s[1] and s[2] then
    local tokens = tonumber(s[1])
    local last = tonumber(s[2])
    local elapsed = now - last
    if elapsed < 0 then elapsed = 0 end
    if now > last then last = now end
    tokens = math.min(burst, tokens + elapsed * rate + amount)
    redis.call('HSET', key, 'tokens', string.format('%.17g', tokens), 'last', string.format('%.17g', last))
    local ttl = math.ceil((last - now + (burst - tokens) / rate) * 1000)
    if ttl < 1000 then ttl = 1000 end
    redis.call('PEXPIRE', key, ttl)
  end
end
return 1
`
