-- now.lua: prepended to every script (scripts.go, newScript). It sets `now`,
-- the time of the call in microseconds: ARGV[1] when the caller passed one
-- (tests, through WithClock), else Redis TIME, the fleet's one clock.
-- Numeric arguments are read as ARGV[i] + 0 here and in the lean scripts:
-- Lua turns the string into a number in the addition, without tonumber's
-- function call.
local now
if ARGV[1] ~= "" then
  now = ARGV[1] + 0
else
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
end

