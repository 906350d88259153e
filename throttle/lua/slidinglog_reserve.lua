-- slidinglog_reserve.lua: grant n tokens from a sliding log, at once or booked
-- for later, or refuse them; at most Max tokens in any window of Window µs.
--
-- All quantities are integer microseconds or tokens, so the arithmetic is exact.
--
-- KEYS[1]  the log: a list of grant times in µs, oldest first, non-decreasing,
--          one entry per token, at most Max entries
-- ARGV[1]  now in microseconds, or "" to read Redis TIME (tests pass an explicit now)
-- ARGV[2]  longest wait in microseconds the caller accepts; "-1" means no bound
-- ARGV[3]  n, tokens to take
-- ARGV[4]  Max, tokens in any window
-- ARGV[5]  Window, µs
--
-- Reply: {granted (0|1), wait µs, remaining tokens, reset µs, now µs, t}
--   The earliest time for n tokens is t = max(now, e_k, e_(k-Max+n) + Window)
--   for the log's k entries e_1..e_k, the last term only when k-Max+n >= 1:
--   windows are half-open, (x-Window, x], so at t the entries e_1..e_(k-Max+n)
--   have left the window and at most Max-n remain in it.
--   granted 1: n copies of t were appended; the caller may act after `wait` µs
--              (t - now); t is the handle a refund needs.
--   granted 0: nothing changed; `wait` is the RetryAfter; t is 0.
--   remaining: the most tokens a request could have at once now (0 while a
--              booking lies ahead); reset: µs until the last entry leaves the window.
--
-- The list keeps only its newest Max entries. Those dropped by a grant at t are
-- at or before e_(k-Max+n) <= t - Window, and every later grant is at or after
-- t, so no window that can still matter holds them (slidinglog_refund.lua keeps
-- that true when a refund moves the list's end back). The key expires when its
-- last entry leaves the window.

local maxwait = tonumber(ARGV[2])
local n, max, window = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local key = KEYS[1]

local k = redis.call("LLEN", key)
local t = now
if k > 0 then
  local last = tonumber(redis.call("LINDEX", key, -1))
  if last > t then t = last end
  local i = k - max + n
  if i >= 1 then
    local due = tonumber(redis.call("LINDEX", key, i - 1)) + window
    if due > t then t = due end
  end
end
local wait = t - now

local granted = 0
if maxwait < 0 or wait <= maxwait then
  granted = 1
  -- n copies of t, in chunks that stay below Lua's unpack limit.
  local left = n
  while left > 0 do
    local chunk = {}
    for j = 1, math.min(left, 1000) do chunk[j] = t end
    redis.call("RPUSH", key, unpack(chunk))
    left = left - #chunk
  end
  k = k + n
  if k > max then
    redis.call("LTRIM", key, k - max, -1)
    k = max
  end
  redis.call("PEXPIRE", key, math.ceil((t + window - now) / 1000))
end

-- remaining and reset, from the log as it now is.
local remaining, reset = max, 0
if k > 0 then
  local last = tonumber(redis.call("LINDEX", key, -1))
  reset = last + window - now
  if reset < 0 then reset = 0 end
  if last > now then
    remaining = 0
  else
    -- entries in (now - Window, now]: find the first one after the edge.
    local edge = now - window
    local lo, hi = 0, k -- the first index (0-based) with an entry > edge is in [lo, hi]
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if tonumber(redis.call("LINDEX", key, mid)) > edge then
        hi = mid
      else
        lo = mid + 1
      end
    end
    remaining = max - (k - lo)
    if remaining < 0 then remaining = 0 end
  end
end

return {granted, wait, remaining, reset, now, granted * t}
