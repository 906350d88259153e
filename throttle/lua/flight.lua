-- flight.lua: report a window of samples to an automatic in-flight bound
-- (Concurrency.Auto), claim the fleet's window if it is due, and read the
-- bound. The law itself runs in Go (flight_law.go) in the process that
-- claimed the window, which writes its result with flight_commit.lua.
--
-- The bound's hash, beside the semaphore in its Cluster slot, holds the
-- law's state (limit, bound, base, recent, why, at, slow, probeat, probing,
-- saved, high: see flightState), the fleet's open window (wn, wsum, wover, wstart)
-- and the claim (ctok, cat). Its TTL is ARGV[8] from the latest report.
--
-- KEYS[1]   the bound's hash
-- KEYS[2]   the semaphore's sorted set (hold.lua), for the leases held
-- ARGV[1]   now in microseconds, or "" to read Redis TIME
-- ARGV[2]   samples served, n
-- ARGV[3]   their latencies' sum, µs
-- ARGV[4]   overload answers
-- ARGV[5]   the window's interval, µs
-- ARGV[6]   a claim token, or "" to report (or read) without claiming
-- ARGV[7]   how long a claim stands, µs: a claimant that died is replaced after it
-- ARGV[8]   the hash's TTL, ms
-- ARGV[9]   the fewest samples that close a due window (minSamples)
-- ARGV[10]  after how many intervals one sample does (flightMaxWait)
-- ARGV[11..] pairs of a latency bucket and its samples (latBucket), kept in
--           the window as fields "h:<bucket>"
--
-- Reply: {claimed (0|1), held, now, the eleven state fields (false if none),
--         and if claimed the window taken: wn, wsum, wover, wstart, then
--         its buckets as field, count pairs}
-- A claim takes the window: the next one starts at now, empty.

local n, sum, over = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local interval, token, claimttl = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local k = KEYS[1]

if n > 0 or over > 0 then
  redis.call("HINCRBY", k, "wn", n)
  redis.call("HINCRBY", k, "wsum", sum)
  redis.call("HINCRBY", k, "wover", over)
  redis.call("HSETNX", k, "wstart", now)
  for i = 11, #ARGV, 2 do
    redis.call("HINCRBY", k, "h:" .. ARGV[i], ARGV[i + 1])
  end
  redis.call("PEXPIRE", k, ARGV[8])
end

local held = redis.call("ZCOUNT", KEYS[2], "(" .. now, "+inf")
local st = redis.call("HMGET", k, "limit", "bound", "base", "recent", "why", "at", "slow", "probeat", "probing", "saved", "high")
local reply = {0, held, now}
for i = 1, #st do reply[#reply + 1] = st[i] end

if token == "" then return reply end
local w = redis.call("HMGET", k, "wn", "wsum", "wover", "wstart", "ctok", "cat")
local wn, wover, wstart = tonumber(w[1]) or 0, tonumber(w[3]) or 0, tonumber(w[4])
if not wstart then return reply end
local age = now - wstart
local due = (age >= interval and (wn >= tonumber(ARGV[9]) or wover > 0)) or
  (age >= tonumber(ARGV[10]) * interval and wn > 0)
if not due or (w[5] and now - (tonumber(w[6]) or 0) < claimttl) then return reply end

redis.call("HSET", k, "ctok", token, "cat", now, "wn", 0, "wsum", 0, "wover", 0, "wstart", now)
reply[1] = 1
reply[#reply + 1] = w[1]
reply[#reply + 1] = w[2]
reply[#reply + 1] = w[3]
reply[#reply + 1] = w[4]
local all = redis.call("HGETALL", k)
local gone = {}
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == "h:" then
    reply[#reply + 1] = all[i]
    reply[#reply + 1] = all[i + 1]
    gone[#gone + 1] = all[i]
  end
end
if #gone > 0 then redis.call("HDEL", k, unpack(gone)) end
return reply
