-- tb.lua: the token bucket (Limit) as GCRA, on the TAT state of tat.lua.
-- a1 = T, µs per token; a2 = burst. n tokens fit once the TAT after taking
-- them is at most burst·T ahead. a3 > 0 makes the bucket adaptive
-- (Adaptive): a1 and a2 are its ceiling's and a3 its period in µs.

M.tb = {
  flag = TAT.flag, commit = TAT.commit, istail = TAT.istail,
  has = TAT.has, release = TAT.release, holetill = TAT.holetill,
}

-- load: an adaptive bucket (a3 > 0) at the fleet's effective rate
-- (int.lua's atrate); b.adaptive tells reserve.lua to reply with the T and
-- burst taken under, which a refund must use.
function M.tb.load(b)
  if b.a3 > 0 then
    b.adaptive = true
    b.a1, b.a2 = atrate(b.akey, b.a1, b.a2, b.a3)
  end
  TAT.load(b)
end

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
