-- redeem.lua: redeem a ticket that ticket.lua issued, at most once.
--
-- KEYS[1]   the ticket's record: <bucket key>:ticket:<id>
-- KEYS[2]   the bucket's void marker: <bucket key>:void (void.lua)
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
--
-- Reply: {now, record} if the ticket stood, and the record is deleted, so
-- that no other holder of the same id can redeem it; {now} if there is no
-- such ticket (never issued, expired, redeemed before, or issued at or
-- before the bucket's tickets were voided by a reset).

local v = redis.call("GET", KEYS[1])
if not v then return {now} end
redis.call("DEL", KEYS[1])
local issued = tonumber(string.match(v, "^%-?%d+ (%d+)"))
local void = tonumber(redis.call("GET", KEYS[2]))
if void and (not issued or issued <= void) then return {now} end
return {now, v}
