-- prelude.lua: put after now.lua and int.lua before every bucket script
-- (scripts.go, bucketScript): the tables the policy modules fill, how a
-- call's buckets are read from KEYS and ARGV, and the keys' TTLs.
--
-- A call names k buckets. Bucket i has four keys, all in one hash slot:
--   KEYS[4i-3]  its state (the policy module's layout)
--   KEYS[4i-2]  its holes: cancelled turns offered to later callers (holes.lua)
--   KEYS[4i-1]  its cooldown marker: the cooldown's end in µs, kept until then
--   KEYS[4i]    its effective rate, for an adaptive token bucket (adapt.lua;
--               read by int.lua's atrate); any other bucket repeats its
--               state key here
-- and six arguments from ARGV[base + 6(i-1)]: kind, n, a1, a2, a3, a4 (the
-- policy's parameters as its module reads them; unused ones are 0).

local M = {} -- policy modules by kind: tb, lb, fw, sl, sw
local H = {} -- holes (holes.lua)

local function bucket(i, base)
  local a = base + 6 * (i - 1)
  return {
    key = KEYS[4 * i - 3], hkey = KEYS[4 * i - 2], mkey = KEYS[4 * i - 1], akey = KEYS[4 * i],
    kind = ARGV[a], n = tonumber(ARGV[a + 1]),
    a1 = tonumber(ARGV[a + 2]), a2 = tonumber(ARGV[a + 3]), a3 = tonumber(ARGV[a + 4]),
    a4 = tonumber(ARGV[a + 5]),
  }
end

-- expire sets the TTL of b's state key to ttl ms, and its holes key's with
-- it: holes must last as long as the state that counts them (a hole nobody
-- took is released when the state is next read).
local function expire(b, ttl)
  redis.call("PEXPIRE", b.key, ttl)
  if b.h then redis.call("PEXPIRE", b.hkey, ttl) end
end

-- cooldown is the end of the bucket's cooldown (µs), or 0 if there is none
-- or it has ended (the marker may outlive it by under a millisecond).
local function cooldown(b)
  local c = tonumber(redis.call("GET", b.mkey))
  if not c or c <= now then return 0 end
  return c
end
