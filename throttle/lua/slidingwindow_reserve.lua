-- slidingwindow_reserve.lua: book n at the earliest time the estimate allows (SlidingWindow).
--
-- Slot j runs from j*L to (j+1)*L µs after the Unix epoch; a window is S slots.
-- At t in slot s the window (t - S*L, t] is estimated as
--   est(t) = count[s-S+1 .. s] + count[s-S] * (1 - (t - s*L) / L)
-- and n is granted at the earliest t >= max(now, start of the latest booked
-- slot) with est(t) + n <= Max, to the microsecond: in slot s that is
--   full + n <= Max  and  old * (L - (t - s*L)) <= (Max - n - full) * L
-- with full = count[s-S+1 .. s] and old = count[s-S]. Bookings only go
-- forwards, so the key keeps the counts of slots b-S .. b, b the latest booked
-- slot. All quantities are integer µs, slot indices or counts, and their
-- products stay below 2^53 (SlidingWindow.Validate), so the arithmetic is exact.
--
-- KEYS[1]   state key: a hash {b = latest booked slot, L = slot µs, <slot index> = count, ...}
--           (only counts other than 0)
-- ARGV[1]   now in microseconds, or "" to read Redis TIME (tests pass an explicit now)
-- ARGV[2]   longest wait in microseconds the caller accepts; "-1" means no bound
-- ARGV[3]   n, how much to book
-- ARGV[4]   Max
-- ARGV[5]   L, a slot's length in microseconds
-- ARGV[6]   S, slots per window
--
-- Reply: {granted (0|1), wait µs, remaining, reset µs, now µs, slot index}
--   granted 1: n is booked in slot `slot index` (the refund handle); the caller
--              may act after `wait` µs.
--   granted 0: nothing changed; `wait` is the RetryAfter; slot index is 0.
--   remaining: what a request could have at once now (0 while a later slot has bookings);
--   reset: µs until a request for Max would be granted at once.
-- The key expires at the end of slot b+S, when its last count leaves every window.

local maxwait, n, max, L, S = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

-- a/b rounded down and up, for integers below 2^53 (b > 0). Such a quotient
-- never rounds onto a whole number, but the checks cost nothing.
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function ceildiv(a, b) return -floordiv(-a, b) end

local h = redis.call("HGETALL", KEYS[1])
local b, hl
for i = 1, #h, 2 do
  if h[i] == "b" then b = tonumber(h[i + 1]) elseif h[i] == "L" then hl = tonumber(h[i + 1]) end
end
local count, fields = {}, {} -- slot index -> count; slot index -> field name
local fresh = b == nil or hl ~= L -- no state, or a changed slot length
if fresh then
  b = nil
else
  for i = 1, #h, 2 do
    local j = tonumber(h[i])
    if j then count[j], fields[j] = tonumber(h[i + 1]), h[i] end
  end
end
local function at(j) return count[j] or 0 end

local lower = now
if b and b * L > now then lower = b * L end
local j0 = floordiv(lower, L)
local j, full = j0, 0
for i, c in pairs(count) do
  if i > j - S and i <= j then full = full + c end
end
local t
while true do
  local old, r = at(j - S), max - n - full
  if r >= 0 then
    local off = 0
    if j == j0 then off = lower - j * L end
    if old > r then
      local o = ceildiv(L * (old - r), old)
      if o > off then off = o end
    end
    if off < L then
      t = j * L + off
      break
    end
  end
  full = full + at(j + 1) - at(j - S + 1)
  j = j + 1
end

local wait = t - now
local granted = 0
if maxwait < 0 or wait <= maxwait then
  granted = 1
  if fresh and #h > 0 then redis.call("DEL", KEYS[1]) end
  count[j] = at(j) + n
  b = j
  redis.call("HSET", KEYS[1], j, count[j], "b", b, "L", L)
  local gone = {}
  for i, f in pairs(fields) do
    if i < j - S then
      gone[#gone + 1] = f
      count[i] = nil
    end
  end
  if #gone > 0 then redis.call("HDEL", KEYS[1], unpack(gone)) end
  redis.call("PEXPIRE", KEYS[1], math.ceil(((j + S + 1) * L - now) / 1000))
end

local remaining, reset = 0, 0
if b then
  local s = floordiv(now, L)
  if b <= s then
    local f = 0
    for i, c in pairs(count) do
      if i > s - S and i <= s then f = f + c end
    end
    remaining = max - f - ceildiv(at(s - S) * (L - (now - s * L)), L)
    if remaining < 0 then remaining = 0 end
  end
  local e = b * L
  for i in pairs(count) do
    if (i + S + 1) * L > e then e = (i + S + 1) * L end
  end
  reset = e - now
  if reset < 0 then reset = 0 end
else
  remaining = max
end

return {granted, wait, remaining, reset, now, granted * j}
