/**
 * Concurrency slots in Lua (kind.ts's twin; the contract: ../twins.ts).
 * State: four little-endian doubles `<bucket><c0><c1><c2>`: the newest
 * lease bucket's index and the slots taken in it and the two before it,
 * kept until the newest taken slot's bucket expires.
 */
import { EPSILON } from '../../algorithm.js'

export const LUA = `
local function slots(v, leaseS)
  local nb = floor(nowS * 3 / leaseS)
  local b, c0, c1, c2
  if v and #v == 32 then b, c0, c1, c2 = unpack('<dddd', v) end
  if b == nil then return nb, 0, 0, 0 end
  local d = nb - b
  if d <= 0 then return b, c0, c1, c2 end
  if d == 1 then return nb, 0, c0, c1 end
  if d == 2 then return nb, 0, 0, c0 end
  return nb, 0, 0, 0
end
local function free(max, c0, c1, c2)
  local f = snap(max - (c0 + c1 + c2))
  if f < 0 then return 0 end
  return f
end
local function saved(leaseS, b, c0, c1, c2)
  local newest
  if c0 > 0 then newest = b elseif c1 > 0 then newest = b - 1 elseif c2 > 0 then newest = b - 2 else newest = nil end
  local ttl = 0
  if newest then ttl = ((newest + 3 + 0.001) * leaseS / 3 - nowS) * 1000 end
  return pack('<dddd', b, c0, c1, c2), ttlOf(ttl)
end
local function step(v, max, leaseS, _, cost)
  local b, c0, c1, c2 = slots(v, leaseS)
  if c0 + c1 + c2 + cost <= max + ${EPSILON} then
    c0 = snap(c0 + cost)
    local state, ttl = saved(leaseS, b, c0, c1, c2)
    return true, free(max, c0, c1, c2), 0, state, ttl
  end
  return false, free(max, c0, c1, c2), 1
end
local function adjust(v, max, leaseS, _, amount, at)
  if not v and amount >= 0 then return nil end
  local b, c0, c1, c2 = slots(v, leaseS)
  if amount < 0 then return saved(leaseS, b, snap(c0 - amount), c1, c2) end
  local i = b - floor(at * 3 / leaseS)
  if i > 2 then return nil end
  if i < 0 then i = 0 end
  local c = { c0, c1, c2 }
  local rest = amount
  for _, j in ipairs({ i, i - 1, i + 1 }) do
    if j >= 0 and j <= 2 then
      local t = math.min(rest, c[j + 1])
      c[j + 1] = snap(c[j + 1] - t)
      rest = rest - t
    end
  end
  return saved(leaseS, b, c[1], c[2], c[3])
end
return step, adjust`
