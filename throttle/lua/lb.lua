-- lb.lua: the leaky bucket (LeakyBucket), an even pace on the TAT state of
-- tat.lua. a1 and a4 = T, µs and picoseconds per token; a2 = capacity. A
-- request's turn is the TAT; the bucket holds ceil((TAT - now)/T) tokens,
-- and n more fit if TAT - now + n·T <= capacity·T. A full bucket refuses at
-- once: its RetryAfter is the time until n fit, if the wait is within the
-- caller's budget, else the time until the meter is idle (each rounded up
-- to a whole µs).

M.lb = {
  load = TAT.load, flag = TAT.flag, commit = TAT.commit, istail = TAT.istail,
  has = TAT.has, release = TAT.release, holetill = TAT.holetill,
}

function M.lb.tail(b, maxwait)
  local wait, ew = TAT.ahead(b), TAT.over(b)
  --{ lb.full: wait is the turn, the TAT's µs after now; n more than the
  -- bucket holds would take it over its capacity by ew (rounded up): a
  -- full bucket refuses, with a RetryAfter of ew if the turn is within
  -- maxwait, else the turn
  local full = ew > 0
  if full and (maxwait < 0 or wait <= maxwait) then wait = ew end
  --}
  if full then return nil, wait end
  return now + wait
end

function M.lb.figures(b)
  return TAT.left(b, b.a2), TAT.ahead(b)
end

function M.lb.rollback(b, n, handle, hf)
  local floor = cooldown(b)
  if floor < now then floor = now end
  TAT.rollback(b, handle, hf, floor, 0)
end

-- settle (TAT.settle): every turn lies at least T behind the TAT its
-- booking leaves, whichever call booked it, until one is settled (TAT.near).
function M.lb.settle(b, used, handle, hf, slot)
  local floor = cooldown(b)
  if floor < now then floor = now end
  local s = TAT.settle(b, used, handle, hf, slot, 1, H.near(b), floor, 0)
  if s > 0 then TAT.near(b, s) end
end

-- hold: the next turn no sooner than till.
function M.lb.hold(b, till)
  if till > b.tw then
    b.tw, b.tf = till, 0
    TAT.put(b)
  end
end

-- fromhole: the grant takes the turn's instant; the rest of the hole starts
-- n·T after it, at the slot that rounds up to (H.take).
function M.lb.fromhole(b, h, n)
  local w, f = TAT.instant(h)
  local nw, nf = pmul(b.a1, b.a4, n)
  h.handle, h.hf = pn(w + nw, f + nf)
  h.at = h.handle
  if h.hf > 0 then h.at = h.at + 1 end
  h.till = TAT.holetill(b, h.at)
  return w, f
end
