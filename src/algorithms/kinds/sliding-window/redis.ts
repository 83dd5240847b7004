/**
 * The sliding window in Lua (kind.ts's twin; the contract: ../twins.ts).
 * State: three little-endian doubles `<prev><cur><window start s>`, kept
 * until both counts are out of the window. kind.ts's estimate and fitsAt
 * are written out in step: the functions are made on each call that needs
 * the kind, and each one made costs Redis time.
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
local function ttl(prev, cur, start, windowS)
  local finish = start
  if cur > 0 then finish = start + 2 * windowS elseif prev > 0 then finish = start + windowS end
  return ttlOf((finish - nowS) * 1000)
end
local function step(v, limit, windowS, _, cost)
  local prev, cur, start = current(v, windowS)
  local e = nowS - start
  if e < 0 then e = 0 end
  local est = snap(prev * (1 - e / windowS) + cur)
  local ok = est + cost <= limit + ${EPSILON}
  local left, x
  if ok then
    cur = cur + cost
    left = snap(limit - est - cost)
    x = limit - 1
  else
    left = snap(limit - est)
    x = limit - cost
  end
  local wait = 0
  if not ok or left + ${EPSILON} < 1 then
    -- When, with no more requests, the estimate is down to x (kind.ts, fitsAt).
    if x < 0 then x = 0 end
    local t = nowS
    if cur > x then t = start + 2 * windowS - windowS * x / cur
    elseif prev > 0 then t = start + windowS * (1 - (x - cur) / prev) end
    wait = secondsTo(t)
  end
  if not ok then return false, left, wait end
  return true, left, wait, pack('<ddd', prev, cur, start), ttl(prev, cur, start, windowS)
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
