-- lb.lua: the leaky bucket (LeakyBucket), an even pace on the TAT state of
-- tat.lua. a1 = T, µs per token; a2 = capacity. A request's turn is the TAT;
-- the bucket holds ceil((TAT - now)/T) tokens, and n more fit if
-- TAT - now + n·T <= capacity·T. A full bucket refuses at once: its
-- RetryAfter is the time until n fit, if that wait is within the caller's
-- budget, else the time until the meter is idle.

M.lb = {
  load = TAT.load, flag = TAT.flag, commit = TAT.commit, istail = TAT.istail,
  has = TAT.has, release = TAT.release, holetill = TAT.holetill,
}

function M.lb.tail(b, maxwait)
  local ahead = b.tat - now
  local over = ahead + b.n * b.a1 - b.a2 * b.a1
  if over > 0 then
    if maxwait < 0 or ahead <= maxwait then return nil, over end
    return nil, ahead
  end
  return b.tat
end

function M.lb.figures(b)
  local ahead = b.tat - now
  local left = b.a2 - ceildiv(ahead, b.a1)
  if left < 0 then left = 0 end
  return left, ahead
end

function M.lb.rollback(b, n, handle)
  local floor = cooldown(b)
  if floor < now then floor = now end
  TAT.rollback(b, n, handle, floor)
end

-- hold: the next turn no sooner than till.
function M.lb.hold(b, till)
  if till > b.tat then
    b.tat = till
    TAT.put(b)
  end
end

-- nextturn: the turn after n at `at` is n·T later (H.take).
function M.lb.nextturn(b, at, n) return at + n * b.a1 end
