-- reserve_batch.lua: many reserve calls of one shape in one script call
-- (after reserve.lua; the coalescing of coalesce.go): the same buckets, n,
-- policies and Share, each call with its own longest wait. They are
-- decided one after the other, each on the state the one before left, as
-- the same calls arriving one after another at the same instant would be.
--
-- ARGV[1]         now in µs, or "" to read Redis TIME
-- ARGV[2]         m, the number of calls
-- ARGV[3..2+m]    each call's longest wait in µs ("-1": no bound)
-- ARGV[3+m..]     six per bucket (prelude.lua), then a Share's (share.lua)
--
-- Reply: the m replies of reserve.lua, one after the other.

local m = tonumber(ARGV[2])
local out = {}
for j = 1, m do
  for _, x in ipairs(reserve(tonumber(ARGV[2 + j]), 3 + m)) do out[#out + 1] = x end
end
return out
