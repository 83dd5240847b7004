/**
 * The window counter in Lua (kind.ts's twin; the contract: ../twins.ts).
 * State: two little-endian doubles `<count><window start s>`, kept until
 * the window ends. Calendar months by civil-date arithmetic on whole days
 * (H. Hinnant's days_from_civil / civil_from_days): Redis' Lua has no date
 * functions.
 */
import { EPSILON } from '../../algorithm.js'

export const LUA = `
local function monthOf(t)
  local z = floor(t / 86400) + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local mp = floor((5 * (doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))) + 2) / 153)
  local y = yoe + era * 400
  if mp >= 10 then return (y + 1 - 1970) * 12 + mp - 10 end
  return (y - 1970) * 12 + mp + 2
end
local function monthStart(k)
  local y = 1970 + floor(k / 12)
  local m = k - floor(k / 12) * 12 + 1
  local mp = m + 9
  if m > 2 then mp = m - 3 else y = y - 1 end
  local era = floor(y / 400)
  local yoe = y - era * 400
  return (era * 146097 + yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + floor((153 * mp + 2) / 5) - 719468) * 86400
end
local function window(v, windowS, origin)
  local count, start
  if v and #v == 16 then count, start = unpack('<dd', v) end
  -- A stored window that starts after now is the current one (kind.ts): a clock behind never resets a count.
  if windowS < 0 then
    local t = nowS
    if start and start > t then t = start end
    local k = floor(monthOf(t) / -windowS) * -windowS
    local s = monthStart(k)
    if start ~= s then count = 0 end
    return count, s, monthStart(k - windowS)
  end
  if origin >= 0 then
    local s = floor((nowS - origin) / windowS) * windowS + origin
    if start and start > nowS then s = start end
    if start ~= s then count = 0 end
    return count, s, s + windowS
  end
  if count == nil or nowS >= start + windowS then return 0, nowS, nowS + windowS end
  return count, start, start + windowS
end
local function step(v, limit, windowS, origin, cost)
  local count, start, finish = window(v, windowS, origin)
  local nxt = count + cost
  if nxt > limit + ${EPSILON} then return false, count, secondsTo(finish) end
  return true, nxt, secondsTo(finish), pack('<dd', nxt, start), ttlOf((finish - nowS) * 1000)
end
local function adjust(v, limit, windowS, origin, amount)
  local count, start, finish = window(v, windowS, origin)
  if count == 0 and amount >= 0 then return nil end
  count = count - amount
  if count < 0 then count = 0 end
  return pack('<dd', count, start), ttlOf((finish - nowS) * 1000)
end
return step, adjust`
