-- lane.lua: the lane of a key of a queue (see lanes.go): the lane kept for
-- it, renewed, or, for a key seen for the first time, the lane the caller
-- chose (the least-loaded), kept from now on. The first write wins, so two
-- clients giving a new key a lane at once agree.
--
-- KEYS[1]   the key's lane: sluice:lane:{<queue>}:<key>
-- ARGV[1]   the lane to keep if there is none yet
-- ARGV[2]   how long to keep it after this call, milliseconds
--
-- Reply: the key's lane, as a string.

local v = redis.call("GET", KEYS[1])
if not v then
  v = ARGV[1]
  redis.call("SET", KEYS[1], v, "PX", ARGV[2])
else
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return v
