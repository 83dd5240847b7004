/**
 * The token bucket in Lua (kind.ts's twin; the contract: ../twins.ts): rate,
 * burst, the longest wait in seconds (the debt allowed is that × rate; 0
 * when the limit has none). State:
 * 16 bytes, two little-endian IEEE doubles `<tokens><last>` (last in whole
 * microseconds of server time, so elapsed time is exact), kept until the
 * bucket is full again, after which forgetting it is lossless: an absent
 * bucket reads as full. docs/stores.md ("Redis") shows how to read one by hand.
 */
import { EPSILON } from '../../algorithm.js'

export const LUA = `
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
local function step(v, rate, burst, delay, cost)
  local tokens, last = bucket(v, rate, burst)
  local debt = rate * delay
  if cost <= burst and tokens + debt >= cost then
    tokens = snap(tokens - cost)
    return true, tokens, 0, pack('<dd', tokens, last), ttlOf((last - now) / 1000 + (burst - tokens) / rate * 1000)
  end
  local wait = ceil((cost - tokens - debt) / rate - ${EPSILON})
  if wait < 1 then wait = 1 end
  return false, tokens, wait
end
local function adjust(v, rate, burst, _, amount)
  if not v and amount >= 0 then return nil end
  local tokens, last = bucket(v, rate, burst)
  tokens = snap(tokens + amount)
  if tokens > burst then tokens = burst end
  return pack('<dd', tokens, last), ttlOf((last - now) / 1000 + (burst - tokens) / rate * 1000)
end
return step, adjust`
