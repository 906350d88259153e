-- share.lua: the fair share of one bucket of a reserve call among tenants
-- (throttle.Share; the Go twin is share_memory.go, the law docs/fairness.md).
--
-- A call with a share has two keys after its buckets' and five arguments
-- after theirs (six per bucket, prelude.lua):
--   KEYS[4k+1]  sorted set: tenant → its tag, µs (its virtual clock)
--   KEYS[4k+2]  hash: "w:"..tenant → weight, "d:"..tenant → the tenant's next
--               come-back place (µs), "W" → the sum of the weights in the
--               set, "e" → when both keys expire (µs)
--   ARGV        tenant, weight, horizon µs, T (µs per token of the shared
--               bucket), n (tokens the call takes from it)
--
-- A tenant is in the set while its tag is ahead of now. Each call first
-- forgets up to 64 tenants whose tags have passed (their weights leave W).
-- A tenant whose tag is more than the horizon ahead of now is over its
-- share: the call books nothing and answers the tenant's next come-back
-- place (at least tag - horizon, when its share has room again), which
-- then moves n·T on. Otherwise the call proceeds, and if it
-- books, the tenant's tag moves to max(tag, now) + ceil(n·T·W/weight) (in
-- doubles, at most 10^14), W counting the tenant.

local S = nil

local function shareload(k)
  if #KEYS % 4 ~= 2 then return end
  local a = 3 + 6 * k
  S = {
    zkey = KEYS[4 * k + 1], hkey = KEYS[4 * k + 2],
    tenant = ARGV[a], w = tonumber(ARGV[a + 1]), horizon = tonumber(ARGV[a + 2]),
    t = tonumber(ARGV[a + 3]), n = tonumber(ARGV[a + 4]),
  }
  local W = tonumber(redis.call("HGET", S.hkey, "W")) or 0
  local gone = redis.call("ZRANGEBYSCORE", S.zkey, "-inf", now, "LIMIT", 0, 64)
  for _, m in ipairs(gone) do
    W = W - (tonumber(redis.call("HGET", S.hkey, "w:" .. m)) or 0)
    redis.call("HDEL", S.hkey, "w:" .. m, "d:" .. m)
    redis.call("ZREM", S.zkey, m)
  end
  if W < 0 then W = 0 end
  if #gone > 0 then redis.call("HSET", S.hkey, "W", fmt(W)) end
  S.W = W
  local tag = tonumber(redis.call("ZSCORE", S.zkey, S.tenant))
  S.old = tonumber(redis.call("HGET", S.hkey, "w:" .. S.tenant))
  if not tag or tag < now then tag = now end
  S.tag = tag
end

-- sharekeep makes both keys last until at least `till` (µs).
local function sharekeep(till)
  local e = tonumber(redis.call("HGET", S.hkey, "e")) or 0
  if till > e then e = till end
  redis.call("HSET", S.hkey, "e", fmt(e), "W", fmt(S.W))
  redis.call("PEXPIRE", S.hkey, ms(e - now))
  redis.call("PEXPIRE", S.zkey, ms(e - now))
end

-- shareover is the come-back wait (µs) of a tenant over its share, having
-- moved its come-back place on; nil if it is within its share.
local function shareover()
  if not S or S.tag - now <= S.horizon then return nil end
  local d = tonumber(redis.call("HGET", S.hkey, "d:" .. S.tenant)) or 0
  local from = S.tag - S.horizon
  if d < from then d = from end
  redis.call("HSET", S.hkey, "d:" .. S.tenant, fmt(d + S.n * S.t))
  sharekeep(d + S.n * S.t)
  return d - now
end

-- sharecommit moves the tenant's tag past a booking of n.
local function sharecommit()
  if not S then return end
  local W = S.W - (S.old or 0) + S.w
  S.W = W
  local step = math.ceil(S.n * S.t * W / S.w)
  if step > 100000000000000 then step = 100000000000000 end
  S.tag = S.tag + step
  redis.call("ZADD", S.zkey, fmt(S.tag), S.tenant)
  redis.call("HSET", S.hkey, "w:" .. S.tenant, S.w)
  sharekeep(S.tag)
end
