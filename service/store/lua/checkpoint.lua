-- KEYS: head, lease, fence, checkpoints, log, commits, new checkpoint.
-- ARGV: holder, token, version, cursor, items seen.
-- Make the checkpoint (the whole state of ``version``, written piece by piece beforehand) the
-- one to recover from, if this applier still holds the lease and it is newer than the current
-- one; then drop what it makes unnecessary: older checkpoints, the log up to its cursor, and
-- the commit records up to its version.
-- uses: int, stream_ids, keep_only
local head = redis.call('HMGET', KEYS[1], 'version', 'cursor', 'checkpoint_version')
if not head[1] then
  return {'NOTFOUND'}
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] or redis.call('GET', KEYS[3]) ~= ARGV[2] then
  return {'LEASE'}
end
if redis.call('EXISTS', KEYS[7]) == 0 then
  return {'MISSING'}
end
if tonumber(ARGV[3]) > tonumber(head[1]) or cmp_id(ARGV[4], head[2]) > 0 then
  return {'AHEAD', head[1]}
end
if head[3] and tonumber(head[3]) >= tonumber(ARGV[3]) then
  return {'OLDER', head[3]}
end
redis.call('HSET', KEYS[1], 'checkpoint_key', KEYS[7], 'checkpoint_version', ARGV[3],
           'checkpoint_cursor', ARGV[4], 'checkpoint_items', ARGV[5])
redis.call('HDEL', KEYS[1], 'checkpoint_layout')
redis.call('SADD', KEYS[4], KEYS[7])
keep_only(KEYS[4], KEYS[7])
local ms, seq = string.match(ARGV[4], '^(%d+)-(%d+)$')
redis.call('XTRIM', KEYS[5], 'MINID', ms .. '-' .. int_str(tonumber(seq) + 1))
local version = tonumber(ARGV[3])
while true do
  local first = redis.call('LINDEX', KEYS[6], 0)
  if not first then break end
  local v = tonumber(string.match(first, '^%[(%d+),'))
  if v > version then break end
  redis.call('LPOP', KEYS[6])
end
return {'OK'}
