-- make_checkpoint(K, A): CHECKPOINT's body on key and argument tables laid out as its KEYS
-- and ARGV (its header says what each is), so that APPEND_COMMIT can commit a version and
-- make its state the checkpoint in one script. Needs int, stream_ids and keep_only first.
local function make_checkpoint(K, A)
  local head = redis.call('HMGET', K[1], 'version', 'cursor', 'checkpoint_version')
  if not head[1] then
    return {'NOTFOUND'}
  end
  if redis.call('GET', K[2]) ~= A[1] or redis.call('GET', K[3]) ~= A[2] then
    return {'LEASE'}
  end
  if redis.call('EXISTS', K[7]) == 0 then
    return {'MISSING'}
  end
  if tonumber(A[3]) > tonumber(head[1]) or cmp_id(A[4], head[2]) > 0 then
    return {'AHEAD', head[1]}
  end
  if head[3] and tonumber(head[3]) >= tonumber(A[3]) then
    return {'OLDER', head[3]}
  end
  redis.call('HSET', K[1], 'checkpoint_key', K[7], 'checkpoint_version', A[3],
             'checkpoint_cursor', A[4], 'checkpoint_items', A[5])
  redis.call('HDEL', K[1], 'checkpoint_layout')
  redis.call('SADD', K[4], K[7])
  keep_only(K[4], K[7])
  local ms, seq = string.match(A[4], '^(%d+)-(%d+)$')
  redis.call('XTRIM', K[5], 'MINID', ms .. '-' .. int_str(tonumber(seq) + 1))
  local version = tonumber(A[3])
  while true do
    local first = redis.call('LINDEX', K[6], 0)
    if not first then break end
    local v = tonumber(string.match(first, '^%[(%d+),'))
    if v > version then break end
    redis.call('LPOP', K[6])
  end
  return {'OK'}
end
