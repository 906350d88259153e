-- release.lua: give back a lease of a distributed semaphore (see hold.lua), and
-- wake a waiter.
--
-- KEYS[1]   the semaphore's sorted set
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
-- ARGV[2]   the lease id
--
-- Reply: 1 if the lease held a slot, now free; 0 if it had run out or was
-- released before (so a retried release is safe).
-- A freed slot is announced with PUBLISH on the channel named like KEYS[1]
-- (pub/sub channels are not keys: any node's subscribers hear it, on a Cluster
-- too), which wakes a blocked Hold of the key in each process that has one.
-- Removing members never creates the key, so its TTL stays.

redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
if redis.call("ZREM", KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call("PUBLISH", KEYS[1], "1")
return 1
