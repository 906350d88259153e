-- shares.lua: read a shared bucket's (level, tenant) pairs
-- (Limiter.Shares), taking nothing (after now.lua).
--
-- KEYS[1]  the pairs' tags (sorted set), KEYS[2] their hash (share.lua)
-- ARGV[1]  now in µs, or ""; ARGV[2] the most pairs to list
--
-- Reply: {now, W1, W2, W3, W4, W5, floor, count, pair_1, tag_1, weight_1,
-- back_1, ...}: count pairs have tags ahead of now; the first `most` of
-- them are listed, furthest first; W1..W5 are the stored sums of weights of
-- each level (pairs whose tags have passed leave them at the next reserve),
-- floor the floor last used in ppm (0: none); back is 0 if the pair has none.

local most = tonumber(ARGV[2])
local reply = {now}
for _, x in ipairs(redis.call("HMGET", KEYS[2], "W1", "W2", "W", "W4", "W5", "f")) do
  reply[#reply + 1] = tonumber(x) or 0
end
reply[#reply + 1] = redis.call("ZCOUNT", KEYS[1], "(" .. now, "+inf")
local top = redis.call("ZREVRANGEBYSCORE", KEYS[1], "+inf", "(" .. now, "WITHSCORES", "LIMIT", 0, most)
for i = 1, #top, 2 do
  local m = top[i]
  reply[#reply + 1] = m
  reply[#reply + 1] = tonumber(top[i + 1])
  reply[#reply + 1] = tonumber(redis.call("HGET", KEYS[2], "w:" .. m)) or 0
  reply[#reply + 1] = tonumber(redis.call("HGET", KEYS[2], "d:" .. m)) or 0
end
return reply
