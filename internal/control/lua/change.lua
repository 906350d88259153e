-- change.lua: sets or unsets a runtime limit and tells the workers, whole or
-- not at all, or checks that this connection's user may do so.
--
-- KEYS[1]: the runtime limits hash, <prefix>{ctl}:limits
-- ARGV[1]: "check" (change nothing), "set" or "unset"
-- ARGV[2]: the changes channel, <prefix>{ctl}:changes
-- ARGV[3]: the type (set, unset)
-- ARGV[4]: the entry, JSON (set)
--
-- reply: 1 when a limit was set or removed (or, for check, may be); 0 when
-- unset found none. An error reply when the user may not run one of the
-- commands, before anything changed.
--
-- A script stops at its first error without undoing what it did before, so
-- every command is checked before the first runs (redis.acl_check_cmd, Redis
-- 7 and later). Before Redis 7, check writes nothing to the hash (HDEL of a
-- field that is never a type), and set and unset publish first: the one
-- change their failure could leave is a message that makes the workers read
-- limits that did not change.
local op, channel, typ = ARGV[1], ARGV[2], ARGV[3]

local function denied()
  if not redis.acl_check_cmd then
    return nil
  end
  for _, c in ipairs({
    {'hset', KEYS[1], '=', ''},
    {'hdel', KEYS[1], '='},
    {'publish', channel, ''},
  }) do
    if not redis.acl_check_cmd(unpack(c)) then
      return redis.error_reply('NOPERM this user has no permissions to run the \'' .. c[1] .. '\' command on ' .. c[2])
    end
  end
  return nil
end

local err = denied()
if err then
  return err
end
if op == 'check' then
  redis.call('HDEL', KEYS[1], '=') -- '=' is never a type: a write that changes nothing
  return 1
end
redis.call('PUBLISH', channel, typ)
if op == 'set' then
  redis.call('HSET', KEYS[1], typ, ARGV[4])
  return 1
end
return redis.call('HDEL', KEYS[1], typ)
