-- slidinglog_refund.lua: take a cancelled booking's entries out of a sliding
-- log, at most once.
--
-- KEYS[1]  the log (see slidinglog_reserve.lua)
-- KEYS[2]  the reservation's marker key (same hash slot); its presence means "already refunded"
-- ARGV[1]  now in microseconds, or "" to read Redis TIME
-- ARGV[2]  the reservation's slot: the server time (µs) at which it may act
-- ARGV[3]  n, tokens reserved
-- ARGV[4]  t, the reservation's grant time (slidinglog_reserve.lua's handle)
-- ARGV[5]  Max
-- ARGV[6]  Window, µs
--
-- Reply: 1 if the refund was processed now (what it gives back, if anything, is below),
-- 0 if the slot has passed or it was processed before.
--
-- Up to n entries equal to t come off the list, the last ones (LREM with -n).
-- The list dropped its old entries on the ground that its end never moves back,
-- and this moves it back; so as many stand-ins go on at its front, each at or
-- after every dropped entry, so that those still count: the first entry (everything
-- dropped is at or before it), or t - Window if that is earlier and no entry
-- comes after t. (Then every grant that stands is at or before t; those after
-- t - Window share the window ending at t, so there are at most Max - n of
-- them, and the list still holds at least that many entries after t - Window.)
-- Entries only move earlier, so the log is never stricter than before; the
-- next caller asking as much as the last booking cancelled gets its slot or an
-- earlier one. The marker key expires 1 s after the slot.

local key = KEYS[1]
local n, t, window = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
local first = redis.call("LINDEX", key, 0)
if not first then return 1 end
first = tonumber(first)
local tail = tonumber(redis.call("LINDEX", key, -1)) == t

-- t as a number, as slidinglog_reserve.lua pushed it, so the two compare equal.
local m = redis.call("LREM", key, -n, t)
if m == 0 then return 1 end

local pad = first
if tail and t - window < pad then pad = t - window end
local left = m
while left > 0 do
  local chunk = {}
  for j = 1, math.min(left, 1000) do chunk[j] = pad end
  redis.call("LPUSH", key, unpack(chunk))
  left = left - #chunk
end

local last = tonumber(redis.call("LINDEX", key, -1))
if last + window <= now then
  redis.call("DEL", key)
else
  redis.call("PEXPIRE", key, math.ceil((last + window - now) / 1000))
end
return 1
