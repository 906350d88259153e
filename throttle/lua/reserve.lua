-- reserve.lua: take n from every bucket of the call, or from none, at the
-- earliest time every bucket can grant it (after prelude.lua, holes.lua and
-- the modules of the call's policies; before reserve_one.lua, one call, or
-- reserve_batch.lua, many calls of one shape).
--
-- KEYS     four per bucket (prelude.lua); all in one hash slot
-- ARGV[1]  now in µs, or "" to read Redis TIME (tests pass an explicit now)
-- ARGV[2]  the longest wait in µs the caller accepts; "-1" means no bound
-- ARGV[3..] six per bucket: kind, n, a1, a2, a3, a4
-- and, for a call with a share (throttle.Share), two keys and five
-- arguments more (share.lua).
--
-- Reply: {granted (0|1), wait µs, remaining, reset µs, now µs, handle_1 .. handle_k}
--   granted 1: every bucket booked n at now + wait, the slot; handle_i is
--              what a refund of bucket i needs (0 0: served from a hole),
--              two integers: a token or leaky bucket's TAT before the
--              booking, µs and picoseconds (tat.lua), or a window's index
--              or a log entry's time and 0.
--   granted 0: nothing changed; wait is the RetryAfter; the handles are 0.
--   granted 2: the tenant is over its share: nothing booked; wait is its
--              come-back place, moved on (share.lua).
--   remaining: the fewest any bucket could grant at once; reset: the µs until
--              every bucket could grant its most at once.
--
-- The slot is the earliest s >= now at which each bucket can grant: from a
-- hole whose span holds s, or at its tail from its earliest time on. Each
-- round moves s to the time the slowest bucket needs, so it ends. A bucket
-- that cannot queue n at all (a full leaky bucket) refuses the call with its
-- own RetryAfter.

local k = math.floor(#KEYS / 4)

-- answer is a call's reply: the figures, each bucket's handle (0 0 when it
-- booked nothing) and, for an adaptive bucket, the T (µs, picoseconds) and
-- burst it took under.
local function answer(bs, granted, wait, remaining, reset)
  local reply = {granted, wait, remaining, reset, now}
  for i, b in ipairs(bs) do
    reply[4 + 2 * i] = b.handle or 0
    reply[5 + 2 * i] = b.hf or 0
  end
  for _, b in ipairs(bs) do
    if b.adaptive then
      reply[#reply + 1] = b.a1
      reply[#reply + 1] = b.a4
      reply[#reply + 1] = b.a2
    end
  end
  return reply
end

-- reserve decides one call for maxwait, its buckets' arguments from
-- ARGV[base], and returns its reply.
local function reserve(maxwait, base)
  local bs = {}
  for i = 1, k do
    local b = bucket(i, base)
    M[b.kind].load(b)
    H.load(b)
    b.e, b.rw = M[b.kind].tail(b, maxwait)
    bs[i] = b
  end

  shareload(k, base)
  sharerate(bs)
  local over = shareover()
  if over then return answer(bs, 2, over, 0, 0) end

  local s, refused = now, nil
  repeat
    local moved = false
    for _, b in ipairs(bs) do
      local x = H.best(b, s)
      if b.e then
        local t = b.e
        if t < s then t = s end
        if x == nil or t < x then x = t end
      end
      if x == nil then
        if refused == nil or b.rw > refused then refused = b.rw end
      elseif x > s then
        s, moved = x, true
      end
    end
  until not moved or refused

  local granted, wait = 0, s - now
  if refused then
    wait = refused
  elseif maxwait < 0 or wait <= maxwait then
    granted = 1
    for _, b in ipairs(bs) do
      local x, h = H.best(b, s)
      if x == s then
        b.handle, b.hf = H.take(b, h)
      else
        b.handle, b.hf = M[b.kind].commit(b, s)
        if s > b.e and M[b.kind].pushed then M[b.kind].pushed(b, s) end
      end
    end
    sharecommit()
  end

  local remaining, reset = nil, 0
  for _, b in ipairs(bs) do
    local r, z = M[b.kind].figures(b)
    if remaining == nil or r < remaining then remaining = r end
    if z > reset then reset = z end
  end
  return answer(bs, granted, wait, remaining, reset)
end
