/**
 * The sliding window in Lua (kind.ts's twin; the contract: ../twins.ts).
 * State: little-endian doubles `<prev><cur><window start s>`, and a fourth,
 * `<next>`, only while something is counted for the next window (a held
 * request, max_delay_ms): 24 or 32 bytes, kept until every count is out of
 * the window. kind.ts's estimate and fitsAt are written out in step: the
 * functions are made on each call that needs the kind, and each one made
 * costs Redis time.
 */
import { EPSILON } from '../../algorithm.js'

export const LUA = `
local function current(v, windowS)
  local prev, cur, start, nxt
  if v and #v == 32 then prev, cur, start, nxt = unpack('<dddd', v)
  elseif v and #v == 24 then
    prev, cur, start = unpack('<ddd', v)
    nxt = 0
  else return 0, 0, nowS, 0 end
  local e = nowS - start
  if e < 0 then e = 0 end
  local k = floor(e / windowS)
  if k == 0 and (prev > 0 or cur > 0 or nxt > 0) then return prev, cur, start, nxt end
  if k == 1 and (cur > 0 or nxt > 0) then return cur, nxt, start + windowS, 0 end
  if k == 2 and nxt > 0 then return nxt, 0, start + 2 * windowS, 0 end
  return 0, 0, nowS, 0
end
local function save(prev, cur, start, nxt, windowS)
  local finish = start
  if nxt > 0 then finish = start + 3 * windowS elseif cur > 0 then finish = start + 2 * windowS elseif prev > 0 then finish = start + windowS end
  local state
  if nxt > 0 then state = pack('<dddd', prev, cur, start, nxt) else state = pack('<ddd', prev, cur, start) end
  return state, ttlOf((finish - nowS) * 1000)
end
local function step(v, limit, windowS, delay, cost)
  local prev, cur, start, nxt = current(v, windowS)
  local e = nowS - start
  if e < 0 then e = 0 end
  local est = snap(prev * (1 - e / windowS) + cur + nxt)
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
    -- When (s after the window's start), with no more requests, the estimate is down to x (kind.ts, fitsAt).
    if x < 0 then x = 0 end
    local t = e
    if cur + nxt > x then
      if nxt <= x then t = 2 * windowS - windowS * (x - nxt) / cur
      else t = 3 * windowS - windowS * x / nxt end
    elseif prev > 0 then t = windowS * (1 - (x - cur - nxt) / prev) end
    local from = t
    if not ok and delay > 0 and cost <= limit + ${EPSILON} then
      if t - e <= delay and t < 2 * windowS then
        -- Held until t, counted in the window t falls in.
        ok = true
        if t < windowS then cur = cur + cost else nxt = nxt + cost end
        left = snap(limit - est - cost)
        from = nil
        wait = t - e
        if wait < 0 then wait = 0 end
      else
        from = (floor(t / windowS) - 1) * windowS
        if t - delay > from then from = t - delay end
      end
    end
    if from then
      wait = ceil(from - e - ${EPSILON})
      if wait < 1 then wait = 1 end
    end
  end
  if not ok then return false, left, wait end
  local state, ttl = save(prev, cur, start, nxt, windowS)
  return true, left, wait, state, ttl
end
local function adjust(v, limit, windowS, held, amount)
  local prev, cur, start, nxt = current(v, windowS)
  if amount >= 0 and prev == 0 and cur == 0 and nxt == 0 then return nil end
  if amount > 0 and held < 0 then
    -- A held request's charge (held: minus the seconds it still had to wait), from the next window's count when counted there.
    local e = nowS - start
    if e < 0 then e = 0 end
    if e - held >= windowS then
      local take = nxt
      if amount < take then take = amount end
      nxt = nxt - take
      amount = amount - take
    end
  end
  cur = cur - amount
  if cur < 0 then
    prev = prev + cur
    cur = 0
    if prev < 0 then
      nxt = nxt + prev
      if nxt < 0 then nxt = 0 end
      prev = 0
    end
  end
  return save(prev, cur, start, nxt, windowS)
end
return step, adjust`
