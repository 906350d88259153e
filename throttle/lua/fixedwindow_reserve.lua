-- fixedwindow_reserve.lua: book n in the earliest window with room (FixedWindow).
--
-- Window i runs from i*W to (i+1)*W µs after the Unix epoch. The state is the
-- cursor: the latest window anything is booked in and its count. A request
-- goes in the cursor's window if it fits there, else in the next one; so
-- requests line up in arrival order, window by window. All quantities are
-- integer µs, window indices or counts below 2^53, so the arithmetic is exact.
--
-- KEYS[1]   state key: a hash {w = cursor window index, c = its count, W = window µs}
-- ARGV[1]   now in microseconds, or "" to read Redis TIME (tests pass an explicit now)
-- ARGV[2]   longest wait in microseconds the caller accepts; "-1" means no bound
-- ARGV[3]   n, how much to book
-- ARGV[4]   Max, the most any window holds
-- ARGV[5]   W, the window's length in microseconds
--
-- Reply: {granted (0|1), wait µs, remaining, reset µs, now µs, window}
--   granted 1: n is booked in window `window` (the refund handle); the caller
--              may act after `wait` µs, when that window starts (0 if it has).
--   granted 0: nothing changed; `wait` is the RetryAfter; window is 0.
--   remaining: what the current window has left (0 once bookings went past it);
--   reset: µs until a request for Max would be granted at once.
-- The key expires when the cursor's window ends: after that it says nothing.

local maxwait, n, max, W = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

-- floor(now / W); a quotient of integers below 2^53 never rounds onto a whole
-- number, but the check costs nothing.
local cur = math.floor(now / W)
if cur * W > now then cur = cur - 1 elseif (cur + 1) * W <= now then cur = cur + 1 end

local st = redis.call("HMGET", KEYS[1], "w", "c", "W")
local w, c = tonumber(st[1]), tonumber(st[2])
if w == nil or c == nil or tonumber(st[3]) ~= W or w < cur then
  w, c = cur, 0 -- no state, a changed window, or the cursor's window has ended
end

local bw, bc = w, c + n
if c + n > max then bw, bc = w + 1, n end
local wait = bw * W - now
if wait < 0 then wait = 0 end

local granted = 0
if maxwait < 0 or wait <= maxwait then
  granted = 1
  w, c = bw, bc
  redis.call("HSET", KEYS[1], "w", w, "c", c, "W", W)
  redis.call("PEXPIRE", KEYS[1], math.ceil(((w + 1) * W - now) / 1000))
end

local remaining = 0
if w == cur and c < max then remaining = max - c end
local reset = w * W - now
if c > 0 then reset = reset + W end
if reset < 0 then reset = 0 end

return {granted, wait, remaining, reset, now, granted * bw}
