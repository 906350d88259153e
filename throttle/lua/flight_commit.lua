-- flight_commit.lua: write the state the law computed from a claimed window
-- (flight.lua) of an automatic in-flight bound, if the claim still stands.
--
-- KEYS[1]   the bound's hash
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
-- ARGV[2]   the claim token flight.lua was given
-- ARGV[3]   the hash's TTL, ms
-- ARGV[4]   the semaphore's pub/sub channel (release.lua's): a bound that
--           rose by k wakes k waiting Holds in each process (at most 1000),
--           as k releases do
-- ARGV[5..] the state's fields and values (flightState)
--
-- Reply: 1 if written; 0 if the claim was taken over (it outlived its
-- term, and another process claimed a later window): nothing changes.

local k = KEYS[1]
if redis.call("HGET", k, "ctok") ~= ARGV[2] then return 0 end
local before = tonumber(redis.call("HGET", k, "bound")) or 0
local kv = {}
local bound = 0
for i = 5, #ARGV, 2 do
  kv[#kv + 1] = ARGV[i]
  kv[#kv + 1] = ARGV[i + 1]
  if ARGV[i] == "bound" then bound = tonumber(ARGV[i + 1]) end
end
redis.call("HDEL", k, "ctok", "cat")
redis.call("HSET", k, unpack(kv))
redis.call("PEXPIRE", k, ARGV[3])
for _ = 1, math.min(bound - before, 1000) do redis.call("PUBLISH", ARGV[4], "1") end
return 1
