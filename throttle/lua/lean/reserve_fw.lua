-- reserve_fw.lua: reserve_tat.lua's counterpart for one fixed window and no
-- Share (after now.lua alone): fw.lua's arithmetic, call after call, with
-- the state read once and written once for a batch. Like reserve_tat.lua it
-- defines no function: fw.lua's and int.lua's fragments are written out
-- here by go generate ./throttle from lua/lean/reserve_fw.lua.
--
-- KEYS[1]        the bucket's state (fw.lua's hash)
-- ARGV[1..]      as reserve_tat.lua's: now, n, a1 = Max, a2 = W (µs), a3
--                (unused), each call's longest wait
--
-- Reply: as reserve_tat.lua's (a handle's picoseconds are 0); {3} if the
-- bucket has holes.

local m = #ARGV - 5
local n, max, W = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0

local st = redis.call("HMGET", KEYS[1], "w", "c", "W", "h", "x")
if st[5] == "1" then return {3} end
local cur -- the window of now
--= floordiv q=cur a=now b=W
-- the fields are numbers this script or fw.lua wrote, read by Lua's own
-- coercion (now.lua); a missing one is false
local w, c = cur, 0
if st[1] and st[2] and st[3] and st[3] + 0 == W and st[1] + 0 >= cur then w, c = st[1] + 0, st[2] + 0 end
local w0 = w -- the window the key holds, if its state stands
if c == 0 then w0 = nil end
local hold = 0
if st[4] then hold = st[4] + 0 end

local out, o, wrote = {}, 0, false
if m == 1 then out = nil end
for j = 1, m do
  local maxwait = ARGV[5 + j] + 0
  --= fw.tail
  local wait, granted, handle = e - now, 0, 0
  if maxwait < 0 or wait <= maxwait then
    -- the window of e: w, or the first that starts at or after it
    local ws = w
    if e >= (w + 1) * W then
      --= floordiv q=ws a=e b=W
    end
    --= fw.book
    granted, handle, wrote = 1, ws, true
  end
  --= fw.figures
  if m == 1 then -- a constructor sizes the table at once (reserve_tat.lua)
    out = {granted, wait, left, reset, now, handle, 0}
  else
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] = granted, wait, left, reset, now, handle, 0
  end
  o = o + 7
end
if wrote and w == w0 then
  -- the same window: only its count moves; the TTL set with it still holds
  redis.call("HSET", KEYS[1], "c", c)
elseif wrote then
  local till = (w + 1) * W
  if hold > till then till = hold end
  redis.call("HSET", KEYS[1], "w", w, "c", c, "W", W, "h", hold, "x", 0)
  local ttl
  --= ms t=ttl us=till-now
  redis.call("PEXPIRE", KEYS[1], ttl)
end
return out
