-- front.lua: move a scheduled asynq task to the front of its queue's
-- pending list, the end asynq's dequeue pops next (RPOPLPUSH), where asynq's
-- own RunTask would push it to the back, behind every job already pending.
-- A job that comes back at its turn (a ticket, a place in its key's line)
-- then runs at its turn, not after a backlog of jobs that have not yet had
-- one. It writes asynq v0.26's own layout (see front in share.go, and its
-- test, which fails if an asynq upgrade changes it).
--
-- KEYS[1]   the task's hash: asynq:{<queue>}:t:<id>
-- KEYS[2]   the queue's pending list: asynq:{<queue>}:pending
-- KEYS[3]   the queue's scheduled set: asynq:{<queue>}:scheduled
-- ARGV[1]   the task's id
-- ARGV[2]   now, Unix nanoseconds (asynq's pending_since)
--
-- Reply: 1 if it moved the task; 0 if the task is not scheduled (gone,
-- taken at its backstop, or moved already).

if redis.call("HGET", KEYS[1], "state") ~= "scheduled" then return 0 end
if redis.call("ZREM", KEYS[3], ARGV[1]) == 0 then return 0 end
redis.call("RPUSH", KEYS[2], ARGV[1])
redis.call("HSET", KEYS[1], "state", "pending", "pending_since", ARGV[2])
return 1
