-- redeem.lua: redeem a ticket that ticket.lua issued, at most once.
--
-- KEYS[1]   the ticket's record: <bucket key>:ticket:<id>
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
--
-- Reply: {now, record} if the ticket stood, and the record is deleted, so
-- that no other holder of the same id can redeem it; {now} if there is no
-- such ticket (never issued, expired, or redeemed before).

local v = redis.call("GET", KEYS[1])
if not v then return {now} end
redis.call("DEL", KEYS[1])
return {now, v}
