-- leakybucket_reserve.lua: book n tokens' turn on a leaky bucket (an even
-- pace, one token every T µs), or refuse them if the bucket is full or the
-- wait is beyond the caller's budget.
--
-- All quantities are integer microseconds or tokens, so the arithmetic is exact.
--
-- KEYS[1]  the meter: the end of the last booked turn in µs (the TAT); absent
--          or at or before now, the meter is idle
-- ARGV[1]  now in microseconds, or "" to read Redis TIME (tests pass an explicit now)
-- ARGV[2]  longest wait in microseconds the caller accepts; "-1" means no bound
-- ARGV[3]  n, tokens to take
-- ARGV[4]  T, microseconds per token
-- ARGV[5]  capacity, the most tokens in the bucket
--
-- Reply: {granted (0|1), wait µs, remaining tokens, reset µs, now µs, tat}
--   The turn is at max(now, TAT), `ahead` = that - now µs from now. The bucket
--   holds ceil(ahead / T) tokens; n more fit if ahead + n*T <= capacity*T.
--   granted 1: the TAT moved to turn + n*T; the caller may act after `wait` =
--              ahead µs; tat is the new TAT, the handle a refund needs.
--   granted 0: nothing changed, and tat is 0. If the bucket is full and the
--              wait is within the budget, `wait` is the time until enough has
--              leaked out for n to fit, ahead + n*T - capacity*T; otherwise it
--              is ahead, after which n would be granted at once.
--   remaining: capacity - ceil(ahead / T), the tokens that would fit now;
--   reset: µs until the bucket is empty.

local maxwait = tonumber(ARGV[2])
local n, t, capacity = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

local tat = tonumber(redis.call("GET", KEYS[1]) or now) or now
if tat < now then tat = now end
local ahead = tat - now
local cost = n * t
local inbudget = maxwait < 0 or ahead <= maxwait

local granted, wait = 0, ahead
if ahead + cost > capacity * t then
  if inbudget then wait = ahead + cost - capacity * t end
elseif inbudget then
  granted = 1
  tat = tat + cost
  redis.call("SET", KEYS[1], tat, "PX", math.ceil((tat - now) / 1000))
end

ahead = tat - now
local held = math.floor(ahead / t)
if held * t < ahead then held = held + 1 end
local remaining = capacity - held
if remaining < 0 then remaining = 0 end

return {granted, wait, remaining, ahead, now, granted * tat}
