-- shares.lua: read a shared bucket's tenants (Limiter.Shares), taking
-- nothing (after now.lua).
--
-- KEYS[1]  the tenants' tags (sorted set), KEYS[2] their hash (share.lua)
-- ARGV[1]  now in µs, or ""; ARGV[2] the most tenants to list
--
-- Reply: {now, W, count, tenant_1, tag_1, weight_1, back_1, ...}: count
-- tenants have tags ahead of now; the first `most` of them are listed,
-- furthest first; W is the stored sum of weights (tenants whose tags have
-- passed leave it at the next reserve); back is 0 if the tenant has none.

local most = tonumber(ARGV[2])
local W = tonumber(redis.call("HGET", KEYS[2], "W")) or 0
local count = redis.call("ZCOUNT", KEYS[1], "(" .. now, "+inf")
local reply = {now, W, count}
local top = redis.call("ZREVRANGEBYSCORE", KEYS[1], "+inf", "(" .. now, "WITHSCORES", "LIMIT", 0, most)
for i = 1, #top, 2 do
  local m = top[i]
  reply[#reply + 1] = m
  reply[#reply + 1] = tonumber(top[i + 1])
  reply[#reply + 1] = tonumber(redis.call("HGET", KEYS[2], "w:" .. m)) or 0
  reply[#reply + 1] = tonumber(redis.call("HGET", KEYS[2], "d:" .. m)) or 0
end
return reply
