-- reserve_one.lua: one reserve call (after reserve.lua): its longest wait is
-- ARGV[2], its buckets' arguments start at ARGV[3].
return reserve(tonumber(ARGV[2]), 3)
