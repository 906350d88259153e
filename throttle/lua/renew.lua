-- renew.lua: extend a lease of a distributed semaphore (see hold.lua).
--
-- KEYS[1]   the semaphore's sorted set
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
-- ARGV[2]   lease in microseconds (> 0)
-- ARGV[3]   the lease id
--
-- Reply: 1 if the lease now runs until now + lease; 0 if it had run out or was
-- released: it is lost, and its slot may be someone else's. A lost lease is
-- never brought back. The key's TTL is always the time until its last lease ends.

local lease, id = tonumber(ARGV[2]), ARGV[3]

redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
if not redis.call("ZSCORE", KEYS[1], id) then return 0 end
redis.call("ZADD", KEYS[1], now + lease, id)
local last = tonumber(redis.call("ZRANGE", KEYS[1], -1, -1, "WITHSCORES")[2])
redis.call("PEXPIRE", KEYS[1], math.ceil((last - now) / 1000) + 1000) -- a second of slack, as int.lua's ms
return 1
