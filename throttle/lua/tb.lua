-- tb.lua: the token bucket (Limit) as GCRA, on the TAT state of tat.lua.
-- a1 and a4 = T, µs and picoseconds per token; a2 = burst. n tokens fit
-- once the TAT after taking them is at most burst·T ahead. a3 > 0 makes the
-- bucket adaptive (Adaptive): a1, a4 and a2 are its ceiling's and a3 its
-- period in µs.

M.tb = {
  flag = TAT.flag, commit = TAT.commit, istail = TAT.istail,
  has = TAT.has, release = TAT.release, holetill = TAT.holetill,
  fromhole = TAT.fromhole,
}

-- load: an adaptive bucket (a3 > 0) at the fleet's effective rate
-- (int.lua's atrate); b.adaptive tells reserve.lua to reply with the T and
-- burst taken under, which a refund must use.
function M.tb.load(b)
  if b.a3 > 0 then
    b.adaptive = true
    b.a1, b.a4, b.a2 = atrate(b.akey, b.a1, b.a4, b.a2, b.a3)
  end
  TAT.load(b)
end

-- tail: the TAT less (burst - n)·T, rounded up to a slot, not before now.
function M.tb.tail(b)
  local ew = TAT.over(b)
  if ew > 0 then return now + ew end
  return now
end

function M.tb.figures(b)
  return TAT.left(b, b.a2), TAT.ahead(b)
end

-- a rollback never undoes a cooldown: the TAT stays at or after its end + (burst-1)·T.
function M.tb.rollback(b, n, handle, hf)
  local fw, ff = now, 0
  local c = cooldown(b)
  if c > 0 then
    local gw, gf = pmul(b.a1, b.a4, b.a2 - 1)
    if c + gw > fw or (c + gw == fw and gf > ff) then fw, ff = c + gw, gf end
  end
  TAT.rollback(b, handle, hf, fw, ff)
end

-- settle (TAT.settle): a later booking's own turn lies at least burst·T
-- behind the TAT it leaves; one a call of several buckets pushed later, or
-- one settled, is recorded (TAT.near).
function M.tb.settle(b, used, handle, hf, slot)
  local fw, ff = now, 0
  local c = cooldown(b)
  if c > 0 then
    local gw, gf = pmul(b.a1, b.a4, b.a2 - 1)
    if c + gw > fw or (c + gw == fw and gf > ff) then fw, ff = c + gw, gf end
  end
  local s = TAT.settle(b, used, handle, hf, slot, b.a2, H.near(b), fw, ff)
  if s > 0 then TAT.near(b, s) end
end

-- refund is settle.lua's upstream rule (Bucket.UpstreamSettle): k tokens
-- not used go back as an upstream that books the estimate up front and
-- refunds the rest when it answers does: the TAT, (w0, f0) before the
-- settle, moves back by k·T, never before the floor (now, or a cooldown's
-- end plus (burst-1)·T), nor above where the settle left it; only while no
-- booking's turn lies ahead (the TAT before, less burst·T, at or before
-- now) and the bucket has no holes (h0: it had before).
function M.tb.refund(b, k, w0, f0, h0)
  if h0 or b.h then return end
  local gw, gf = pmul(b.a1, b.a4, b.a2)
  local xw, xf = pn(w0 - gw, f0 - gf)
  if xw > now or (xw == now and xf > 0) then return end
  local fw, ff = now, 0
  local c = cooldown(b)
  if c > 0 then
    local cw, cf = pmul(b.a1, b.a4, b.a2 - 1)
    if c + cw > fw or (c + cw == fw and cf > ff) then fw, ff = c + cw, cf end
  end
  local kw, kf = pmul(b.a1, b.a4, k)
  local tw, tf = pn(w0 - kw, f0 - kf)
  if tw < fw or (tw == fw and tf < ff) then tw, tf = fw, ff end
  if tw > b.tw or (tw == b.tw and tf >= b.tf) then return end
  b.tw, b.tf = tw, tf
  TAT.put(b)
end

-- pushed: a call of several buckets booked b at s, later than b alone
-- would have, so nearer the TAT than burst·T (TAT.near).
M.tb.pushed = TAT.near

-- hold: nothing before till, then one token, then one per T.
function M.tb.hold(b, till)
  local gw, gf = pmul(b.a1, b.a4, b.a2 - 1)
  local w, f = till + gw, gf
  if w > b.tw or (w == b.tw and f > b.tf) then
    b.tw, b.tf = w, f
    TAT.put(b)
  end
end
