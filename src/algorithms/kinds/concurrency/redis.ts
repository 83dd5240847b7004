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
local function saved(leaseS, b, c0, c1, c2)
  local newest
  if c0 > 0 then newest = b elseif c1 > 0 then newest = b - 1 elseif c2 > 0 then newest = b - 2 else newest = nil end
  local ttl = 0
  if newest then ttl = ((newest + 3 + 0.001) * leaseS / 3 - nowS) * 1000 end
  return pack('<dddd', b, c0, c1, c2), ttlOf(ttl)
end
local function step(v, max, leaseS, _, cost)
  local b, c0, c1, c2 = slots(v, leaseS)
  local ok = c0 + c1 + c2 + cost <= max + ${EPSILON}
  if ok then c0 = snap(c0 + cost) end
  local free = snap(max - (c0 + c1 + c2))
  if free < 0 then free = 0 end
  if not ok then return false, free, 1 end
  local state, ttl = saved(leaseS, b, c0, c1, c2)
  return true, free, 0, state, ttl
end
-- Locals, no tables: a give-back comes once per request.
local function adjust(v, max, leaseS, _, amount, at)
  if not v and amount >= 0 then return nil end
  local b, c0, c1, c2 = slots(v, leaseS)
  if amount < 0 then return saved(leaseS, b, snap(c0 - amount), c1, c2) end
  local i = b - floor(at * 3 / leaseS)
  if i > 2 then return nil end
  if i < 0 then i = 0 end
  local rest = amount
  for k = 0, 2 do
    local j = i
    if k == 1 then j = i - 1 elseif k == 2 then j = i + 1 end
    local have = 0
    if j == 0 then have = c0 elseif j == 1 then have = c1 elseif j == 2 then have = c2 end
    local t = rest
    if have < t then t = have end
    if t > 0 then
      if j == 0 then c0 = snap(c0 - t) elseif j == 1 then c1 = snap(c1 - t) else c2 = snap(c2 - t) end
      rest = rest - t
    end
  end
  return saved(leaseS, b, c0, c1, c2)
end
return step, adjust`
