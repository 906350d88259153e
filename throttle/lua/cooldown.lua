-- cooldown.lua: grant nothing from a bucket until now + d, then resume at its pace.
--
-- KEYS[1]   bucket key
-- KEYS[2]   the bucket's cooldown marker (same hash slot): the cooldown's end, µs, kept until then
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
-- ARGV[2]   d, the cooldown in microseconds (> 0)
-- ARGV[3]   T, microseconds per token
-- ARGV[4]   burst
--
-- Reply: µs from now until the bucket grants its next single token (>= d; more if
-- the bucket was already further in debt). A cooldown never shortens an existing one.
-- TAT = max(TAT, now + d + (burst-1)·T): one token is free at now + d, then one per T.
-- The marker lets turns reserved before the cooldown see it (cooldown_left.lua).

local d, t, burst = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

local v = redis.call("GET", KEYS[1])
local tat = now
if v then
  tat = tonumber(v) or now
  if tat < now then tat = now end
end
local target = now + d + (burst - 1) * t
if target > tat then
  tat = target
  redis.call("SET", KEYS[1], tat, "PX", math.ceil((tat - now) / 1000))
end
local ends = now + d
local cur = tonumber(redis.call("GET", KEYS[2]))
if not cur or ends > cur then
  redis.call("SET", KEYS[2], ends, "PX", math.ceil(d / 1000))
end

local free = tat - now - (burst - 1) * t
if free < 0 then free = 0 end
return free
