-- waits.lua: one worker's longest waits per tenant, merged into the minute's
-- (waits.go).
--
-- KEYS[1]  <prefix>history:{<type>}:waits:<minute>, a sorted set: tenant ->
--          its longest wait in ms in that minute (minute = Unix seconds / 60)
-- ARGV[1]  the most tenants kept; beyond them, the shortest waits go
-- ARGV[2]  the key's time to live in ms
-- ARGV[3..] pairs: tenant, wait in ms
--
-- Reply: the number of tenants the minute keeps.

for i = 3, #ARGV, 2 do
  local t, w = ARGV[i], tonumber(ARGV[i + 1])
  local s = redis.call('ZSCORE', KEYS[1], t)
  if not s or tonumber(s) < w then
    redis.call('ZADD', KEYS[1], w, t)
  end
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[1]) + 1))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])
