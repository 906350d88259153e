-- reserve.lua: take n tokens from every bucket, or from none (GCRA, reservations).
--
-- KEYS[i]      bucket key i (all keys share one hash slot)
-- ARGV[1]      now in microseconds, or "" to read Redis TIME (tests pass an explicit now)
-- ARGV[2]      longest wait in microseconds the caller accepts; "-1" means no bound
-- ARGV[3i]     bucket i: T, microseconds per token (decimal string, may be fractional)
-- ARGV[3i+1]   bucket i: burst (capacity in tokens)
-- ARGV[3i+2]   bucket i: n, tokens to take
--
-- Reply: {granted (0|1), wait µs, remaining tokens, reset µs, now µs, tat_1 .. tat_k}
--   granted 1: every bucket's TAT moved; the caller may act after `wait` µs.
--   granted 0: nothing changed; `wait` is the RetryAfter.
--   tat_i (string): bucket i's TAT after the call, the handle a refund needs.
--   remaining: the fewest tokens left in any bucket; reset: µs until all are full.

local now
if ARGV[1] ~= "" then
  now = tonumber(ARGV[1])
else
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local maxwait = tonumber(ARGV[2])

local k = #KEYS
local news = {}
local wait, reset, remaining = 0, 0, nil
for i = 1, k do
  local a = 3 * i
  local t, burst, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local v = redis.call("GET", KEYS[i])
  local tat = now
  if v then
    tat = tonumber(v) or now
    if tat < now then tat = now end
  end
  local new = tat + n * t
  local w = new - now - burst * t
  if w > wait then wait = w end
  news[i] = new
  if tat - now > reset then reset = tat - now end
  local left = burst - (tat - now) / t
  if remaining == nil or left < remaining then remaining = left end
end
if wait <= 1 then wait = 0 else wait = math.ceil(wait) end

local granted = 0
if maxwait < 0 or wait <= maxwait then
  granted = 1
  reset, remaining = 0, nil
  for i = 1, k do
    local a = 3 * i
    local t, burst = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
    local new = news[i]
    redis.call("SET", KEYS[i], string.format("%.17g", new), "PX", math.ceil((new - now) / 1000))
    if new - now > reset then reset = new - now end
    local left = burst - (new - now) / t
    if remaining == nil or left < remaining then remaining = left end
  end
end

remaining = math.floor(remaining + 1e-9)
if remaining < 0 then remaining = 0 end
local reply = {granted, wait, remaining, math.ceil(reset), now}
for i = 1, k do
  if granted == 1 then
    reply[5 + i] = string.format("%.17g", news[i])
  else
    reply[5 + i] = ""
  end
end
return reply
