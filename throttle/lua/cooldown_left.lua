-- cooldown_left.lua: how much of a bucket's cooldown is left.
--
-- KEYS[1]   the bucket's cooldown marker (cooldown.lua writes it)
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
--
-- Reply: µs until the cooldown ends, 0 if there is none.

local ends = tonumber(redis.call("GET", KEYS[1]))
if not ends or ends <= now then return 0 end
return ends - now
