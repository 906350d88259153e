-- now.lua: prepended to every script (scripts.go, newScript). It sets `now`,
-- the time of the call in microseconds: ARGV[1] when the caller passed one
-- (tests, through WithClock), else Redis TIME, the fleet's one clock.
local now
if ARGV[1] ~= "" then
  now = tonumber(ARGV[1])
else
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

