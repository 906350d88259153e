-- tb.lua: the token bucket (Limit) as GCRA, on the TAT state of tat.lua.
-- a1 = T, µs per token; a2 = burst. n tokens fit once the TAT after taking
-- them is at most burst·T ahead.

M.tb = {
  load = TAT.load, flag = TAT.flag, commit = TAT.commit, istail = TAT.istail,
  has = TAT.has, release = TAT.release, holetill = TAT.holetill,
}

function M.tb.tail(b)
  local e = b.tat + (b.n - b.a2) * b.a1
  if e < now then e = now end
  return e
end

function M.tb.figures(b)
  local ahead = b.tat - now
  local left = floordiv(b.a2 * b.a1 - ahead, b.a1)
  if left < 0 then left = 0 end
  return left, ahead
end

-- a rollback never undoes a cooldown: the TAT stays at or after its end + (burst-1)·T.
function M.tb.rollback(b, n, handle)
  local floor = now
  local c = cooldown(b)
  if c > 0 and c + (b.a2 - 1) * b.a1 > floor then floor = c + (b.a2 - 1) * b.a1 end
  TAT.rollback(b, n, handle, floor)
end

-- hold: nothing before till, then one token, then one per T.
function M.tb.hold(b, till)
  local t = till + (b.a2 - 1) * b.a1
  if t > b.tat then
    b.tat = t
    TAT.put(b)
  end
end
