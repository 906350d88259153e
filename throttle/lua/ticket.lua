-- ticket.lua: issue a ticket, a booked turn handed off for another process
-- to redeem once (see ticket.go, Limiter.IssueTicket).
--
-- KEYS[1]   the ticket's record: <bucket key>:ticket:<id>, beside the bucket
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
-- ARGV[2]   the ticket's slot in µs of store time (past: a late turn)
-- ARGV[3]   µs the record outlives its slot (the grace for a late holder)
-- ARGV[4]   the issuer's note, kept with the slot
--
-- The record is the string "<slot µs> <issued µs> <note>" (issued: now, so
-- that a reset of the bucket can void it), with a TTL until the slot
-- plus the grace, so that one never redeemed (its holder lost) goes on its
-- own. Reply: now, the store's time in µs; 0 if a record of that id exists
-- (ids are random: never, unless one is reused).

local slot = tonumber(ARGV[2])
local ttl = math.ceil((slot - now + ARGV[3]) / 1000)
if ttl < 1 then ttl = 1 end
if not redis.call("SET", KEYS[1], string.format("%d %d ", slot, now) .. ARGV[4], "PX", ttl, "NX") then
  return 0
end
return now
