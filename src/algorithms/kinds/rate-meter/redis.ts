/**
 * The rate meter in Lua (kind.ts's twin; the contract: ../twins.ts). State:
 * four little-endian doubles `<prev><cur><minute s><open until s>`.
 */
import { EPSILON } from '../../algorithm.js'

export const LUA = `
local function step(v, threshold, openS, _, cost)
  local prev, cur, minute, openUntil
  if v and #v == 32 then prev, cur, minute, openUntil = unpack('<dddd', v) end
  if openUntil and openUntil > nowS then return false, threshold, secondsTo(openUntil) end
  local m = floor(nowS / 60) * 60
  -- A stored minute after now's is the current one (kind.ts): a clock behind never resets the spend.
  if minute and minute >= m then m = minute
  elseif minute == m - 60 then prev, cur = cur, 0
  else prev, cur = 0, 0 end
  local e = nowS - m
  if e < 0 then e = 0 end
  local rate = prev * (1 - e / 60) + cur + cost
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
local function adjust(v, threshold, openS, _, amount)
  if not (v and #v == 32) then return nil end
  local prev, cur, minute, openUntil = unpack('<dddd', v)
  if minute < floor(nowS / 60) * 60 then return nil end
  cur = cur - amount
  if cur < 0 then cur = 0 end
  local keep = minute + 120
  if openUntil > keep then keep = openUntil end
  return pack('<dddd', prev, cur, minute, openUntil), ttlOf((keep - nowS) * 1000)
end
return step, adjust`
