-- add.lua: one worker's step of a job type's history (ring.go). The ring is
-- a fixed set of slots: a write lands in slot epoch % SLOTS, replacing what
-- an older lap left there, or merged with the other workers' writes of the
-- same step.
--
-- KEYS[1]  <prefix>history:{<type>}, a hash: "step" -> the step in ms;
--          "0".."119" -> a slot's record, its numbers space-separated:
--          epoch grants done archived refused cooldowns waiting queued limit
--          effective workers
-- ARGV[1]  the step in ms, a whole number of at least 1
-- ARGV[2]  the step's epoch: floor(at / step), at in ms since 1970
-- ARGV[3..12] grants done archived refused cooldowns waiting queued limit
--          effective workers, as numbers
--
-- A stored record of the same epoch is merged: the counts and waiting
-- summed, queued, limit and effective the largest, workers summed. One of an
-- older epoch, or one that does not read as 11 numbers, is replaced; one of
-- a newer epoch is left alone. A ring written at another step restarts at
-- the write's. The key expires SLOTS * step * 2 ms after the last write.
--
-- Reply: 1 if the write was stored, 0 if the slot holds a newer lap.

local SLOTS = 120 -- history.Slots
local step = tonumber(ARGV[1])
local epoch = tonumber(ARGV[2])

local stored = redis.call('HGET', KEYS[1], 'step')
if stored and tonumber(stored) ~= step then
  redis.call('DEL', KEYS[1])
end

local rec = {}
for i = 3, 12 do
  rec[i - 2] = tonumber(ARGV[i])
end

local field = tostring(epoch % SLOTS)
local old = redis.call('HGET', KEYS[1], field)
if old then
  local f, n, bad = {}, 0, false
  for w in string.gmatch(old, '%S+') do
    n = n + 1
    local v = tonumber(w)
    if v == nil or v ~= v or v == math.huge or v == -math.huge then
      bad = true
    end
    f[n] = v
  end
  if n == 11 and not bad then
    if f[1] > epoch then
      return 0
    end
    if f[1] == epoch then
      for i = 1, 6 do -- grants done archived refused cooldowns waiting
        rec[i] = rec[i] + f[i + 1]
      end
      for i = 7, 9 do -- queued limit effective
        rec[i] = math.max(rec[i], f[i + 1])
      end
      rec[10] = rec[10] + f[11] -- workers
    end
  end
end

local out = tostring(epoch)
for i = 1, 10 do
  out = out .. ' ' .. tostring(rec[i])
end
redis.call('HSET', KEYS[1], 'step', ARGV[1], field, out)
redis.call('PEXPIRE', KEYS[1], SLOTS * step * 2)
return 1
