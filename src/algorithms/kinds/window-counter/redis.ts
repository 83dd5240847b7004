/**
 * The window counter in Lua (kind.ts's twin; the contract: ../twins.ts).
 * State: two little-endian doubles `<count><window start s>`, kept until
 * the window ends.
 */
import { EPSILON } from '../../algorithm.js'

export const LUA = `
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
local function step(v, limit, windowS, origin, cost)
  local count, start = window(v, windowS, origin)
  local finish = start + windowS
  local nxt = count + cost
  if nxt > limit + ${EPSILON} then return false, count, secondsTo(finish) end
  return true, nxt, secondsTo(finish), pack('<dd', nxt, start), ttlOf((finish - nowS) * 1000)
end
local function adjust(v, limit, windowS, origin, amount)
  local count, start = window(v, windowS, origin)
  if count == 0 and amount >= 0 then return nil end
  count = count - amount
  if count < 0 then count = 0 end
  return pack('<dd', count, start), ttlOf((start + windowS - nowS) * 1000)
end
return step, adjust`
