/**
 * The sliding window in Lua (kind.ts's twin; the contract: ../twins.ts).
 * State: three little-endian doubles `<prev><cur><window start s>`, kept
 * until both counts are out of the window.
 */
import { EPSILON } from '../../algorithm.js'

export const LUA = `
local function current(v, windowS)
  if v and #v == 24 then
    local prev, cur, start = unpack('<ddd', v)
    local e = nowS - start
    if e < 0 then e = 0 end
    local k = floor(e / windowS)
    if k == 0 and (prev > 0 or cur > 0) then return prev, cur, start end
    if k == 1 and cur > 0 then return cur, 0, start + windowS end
  end
  return 0, 0, nowS
end
local function estimate(prev, cur, start, windowS)
  local e = nowS - start
  if e < 0 then e = 0 end
  return snap(prev * (1 - e / windowS) + cur)
end
local function fitsAt(prev, cur, start, windowS, x)
  if x < 0 then x = 0 end
  if cur <= x then
    if prev > 0 then return start + windowS * (1 - (x - cur) / prev) end
    return nowS
  end
  return start + 2 * windowS - windowS * x / cur
end
local function ttl(prev, cur, start, windowS)
  local t = start
  if cur > 0 then t = start + 2 * windowS elseif prev > 0 then t = start + windowS end
  return ttlOf((t - nowS) * 1000)
end
local function step(v, limit, windowS, _, cost)
  local prev, cur, start = current(v, windowS)
  local est = estimate(prev, cur, start, windowS)
  if est + cost > limit + ${EPSILON} then
    return false, snap(limit - est), secondsTo(fitsAt(prev, cur, start, windowS, limit - cost))
  end
  cur = cur + cost
  local left = snap(limit - est - cost)
  local retry = 0
  if left + ${EPSILON} < 1 then retry = secondsTo(fitsAt(prev, cur, start, windowS, limit - 1)) end
  return true, left, retry, pack('<ddd', prev, cur, start), ttl(prev, cur, start, windowS)
end
local function adjust(v, limit, windowS, _, amount)
  local prev, cur, start = current(v, windowS)
  if amount >= 0 and prev == 0 and cur == 0 then return nil end
  cur = cur - amount
  if cur < 0 then
    prev = prev + cur
    if prev < 0 then prev = 0 end
    cur = 0
  end
  return pack('<ddd', prev, cur, start), ttl(prev, cur, start, windowS)
end
return step, adjust`
