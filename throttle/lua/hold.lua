-- hold.lua: take a slot of a distributed semaphore (Concurrency) if one is free.
--
-- The semaphore is a sorted set: member = lease id, score = the lease's end,
-- µs of server time. A lease holds its slot while now < its end.
--
-- KEYS[1]   the semaphore's sorted set
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
-- ARGV[2]   max, the most leases held at once (>= 1)
-- ARGV[3]   lease in microseconds (> 0)
-- ARGV[4]   the lease id; an id that already holds a slot is granted again
--           (its lease extended), never counted twice, so a retried call is safe
-- KEYS[2], ARGV[5]  only for an automatic bound (Concurrency.Auto): its hash
--           (flight.lua), whose "bound" field is the max while it is below
--           ARGV[2], the ceiling; ARGV[5] is the bound while it has none
--
-- Reply: {granted (0|1), wait µs, held, now µs, expired, max}
--   granted 1: id holds a slot until now + lease; wait is 0.
--   granted 0: no slot was taken; wait is µs until enough leases run out for
--              a slot to be free, if none is renewed or released: with held
--              leases and max slots, the end of the (held - max + 1)th earliest.
--   held:      the leases held after the call.
--   expired:   leases that had run out, removed by this call: slots freed
--              without a release, which no PUBLISH announced.
-- The key's TTL is always the time until its last lease ends.

local max, lease, id = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
if KEYS[2] then
  max = math.min(max, tonumber(redis.call("HGET", KEYS[2], "bound")) or tonumber(ARGV[5]))
end

local expired = redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
local held = redis.call("ZCARD", KEYS[1])
local mine = redis.call("ZSCORE", KEYS[1], id)
if mine or held < max then
  if not mine then held = held + 1 end
  redis.call("ZADD", KEYS[1], now + lease, id)
  local last = tonumber(redis.call("ZRANGE", KEYS[1], -1, -1, "WITHSCORES")[2])
  redis.call("PEXPIRE", KEYS[1], math.ceil((last - now) / 1000) + 1000) -- a second of slack, as int.lua's ms
  return {1, 0, held, now, expired, max}
end

local i = held - max
local nth = redis.call("ZRANGE", KEYS[1], i, i, "WITHSCORES")
return {0, tonumber(nth[2]) - now, held, now, expired, max}
