-- void.lua: void every ticket of a bucket issued until now (see ticket.go):
-- the bucket was reset, and the turns its tickets were booked among are gone.
--
-- KEYS[1]   the bucket's void marker: <bucket key>:void
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
-- ARGV[2]   the marker's TTL in ms: as long as a ticket can live
--
-- Reply: now, the store's time in µs.

redis.call("SET", KEYS[1], string.format("%d", now), "PX", ARGV[2])
return now
