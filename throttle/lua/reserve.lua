-- reserve.lua: take n tokens from every bucket, or from none (GCRA, reservations).
--
-- All quantities are integer microseconds or tokens, so the arithmetic is exact.
--
-- KEYS[i]      bucket key i (all keys share one hash slot)
-- ARGV[1]      now in microseconds, or "" to read Redis TIME (tests pass an explicit now)
-- ARGV[2]      longest wait in microseconds the caller accepts; "-1" means no bound
-- ARGV[3i]     bucket i: T, microseconds per token
-- ARGV[3i+1]   bucket i: burst (capacity in tokens)
-- ARGV[3i+2]   bucket i: n, tokens to take
--
-- Reply: {granted (0|1), wait µs, remaining tokens, reset µs, now µs, tat_1 .. tat_k}
--   granted 1: every bucket's TAT moved; the caller may act after `wait` µs;
--              tat_i is bucket i's TAT after the call, the handle a refund needs.
--   granted 0: nothing changed; `wait` is the RetryAfter; tat_i are 0.
--   remaining: the fewest tokens left in any bucket; reset: µs until all are full.

local maxwait = tonumber(ARGV[2])

local k = #KEYS
local tats, news = {}, {}
local wait = 0
for i = 1, k do
  local a = 3 * i
  local t, burst, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local tat = tonumber(redis.call("GET", KEYS[i]) or now) or now
  if tat < now then tat = now end
  tats[i], news[i] = tat, tat + n * t
  local w = news[i] - now - burst * t
  if w > wait then wait = w end
end

local granted = 0
if maxwait < 0 or wait <= maxwait then
  granted = 1
  for i = 1, k do
    redis.call("SET", KEYS[i], news[i], "PX", math.ceil((news[i] - now) / 1000))
    tats[i] = news[i]
  end
end

local reset, remaining = 0, nil
for i = 1, k do
  local a = 3 * i
  local t, burst = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local ahead = tats[i] - now
  if ahead > reset then reset = ahead end
  local left = math.floor((burst * t - ahead) / t)
  if remaining == nil or left < remaining then remaining = left end
end
if remaining < 0 then remaining = 0 end

local reply = {granted, wait, remaining, reset, now}
for i = 1, k do
  reply[5 + i] = granted * tats[i]
end
return reply
