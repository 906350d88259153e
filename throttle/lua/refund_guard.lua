-- refund_guard.lua: put before every policy's refund script (scripts.go,
-- newRefundScript), after now.lua. A refund does nothing once the
-- reservation's slot (ARGV[2], µs) has come, and at most once: it sets the
-- marker KEYS[2] (same hash slot) until a second after the slot, and a marker
-- already there means it was applied before. Either way the reply is 0.
do
  local slot = tonumber(ARGV[2])
  if now >= slot then return 0 end
  local ttl = math.ceil((slot - now) / 1000) + 1000
  if not redis.call("SET", KEYS[2], "1", "NX", "PX", ttl) then return 0 end
end

