-- commit_version(K, A): COMMIT's body, on key and argument tables laid out as COMMIT's
-- KEYS and ARGV (its header says what each is), so that APPEND_COMMIT can append entries
-- and commit them in one script. Needs int, now, now_ms, stream_ids and keep_only first.
local function commit_version(K, A)
  local head = redis.call('HMGET', K[1], 'version', 'cursor', 'state_key', 'rows_seen',
                          'checkpoint_key')
  if not head[1] then
    return {'NOTFOUND'}
  end
  local holder = redis.call('GET', K[2])
  if holder ~= A[1] then
    return {'LEASE', holder or ''}
  end
  local fence = redis.call('GET', K[3])
  if fence ~= A[2] then
    return {'FENCED', fence or ''}
  end
  if head[1] ~= A[3] then
    return {'VERSION', head[1]}
  end
  if cmp_id(A[4], head[2]) < 0 then
    return {'CURSOR', head[2]}
  end

  redis.call('DEL', K[6])
  redis.call('HSET', K[6], A[7], A[1], unpack(A, 14))
  redis.call('SADD', K[4], K[6])
  if not head[5] then
    -- Earlier layout: the current state hash holds the whole state; it becomes the checkpoint.
    redis.call('HSET', K[1], 'checkpoint_key', head[3], 'checkpoint_version', head[1],
               'checkpoint_cursor', head[2], 'checkpoint_items', head[4],
               'checkpoint_layout', 'whole')
    redis.call('SREM', K[4], head[3])
    redis.call('SADD', K[10], head[3])
    if not redis.call('HGET', K[1], 'entries') then
      redis.call('HSET', K[1], 'entries', redis.call('XLEN', K[12]), 'applied', '0')
    end
  end
  local version = int_str(tonumber(head[1]) + 1)
  local now = now_str()
  redis.call('HSET', K[1], 'version', version, 'cursor', A[4], 'rows_seen', A[5],
             'state_key', K[6], 'updated_at', now)
  redis.call('HINCRBY', K[1], 'applied', A[6])
  local rejected_idem = {}
  local rejections = cjson.decode(A[8])
  if #rejections > 0 then
    local rejected_at = int_str(now_ms())
    for _, r in ipairs(rejections) do
      redis.call('HSET', K[7], r[1], r[2])
      redis.call('ZADD', K[8], rejected_at, r[1])
      local idem = tonumber(r[3])
      if idem > 0 then
        rejected_idem[idem] = true
        if redis.call('EXISTS', K[idem]) == 1 then
          redis.call('HSET', K[idem], 'rejected', r[2])
        end
      end
    end
    local excess = redis.call('ZCARD', K[8]) - tonumber(A[9])
    if excess > 0 then
      local oldest = redis.call('ZPOPMIN', K[8], excess)
      for i = 1, #oldest, 2 do
        redis.call('HDEL', K[7], oldest[i])
      end
    end
  end
  for i = 13, #K do
    if not rejected_idem[i] and redis.call('EXISTS', K[i]) == 1 then
      redis.call('HSET', K[i], 'applied_version', version, 'rows_seen', A[5])
    end
  end
  redis.call('DEL', K[9])
  keep_only(K[4], K[6])
  local rejected_flag = 0
  if #rejections > 0 then rejected_flag = 1 end
  redis.call('RPUSH', K[5], '[' .. version .. ',"' .. A[4] .. '",' .. rejected_flag .. ']')
  if A[10] ~= '' then
    local entry = string.sub(A[10], 1, -2) .. ',"updated_at":' .. now .. '}'
    redis.call('LPUSH', K[11], entry)
    redis.call('LTRIM', K[11], 0, tonumber(A[11]) - 1)
  end
  local checkpoint = redis.call('HMGET', K[1], 'checkpoint_key', 'checkpoint_version',
                                'checkpoint_cursor', 'checkpoint_items', 'checkpoint_layout',
                                'incarnation')
  redis.call('PUBLISH', A[12], table.concat({A[13], checkpoint[6] or '', version, A[4],
                                                A[5], tostring(rejected_flag)}, '	'))
  return {'OK', version, now, checkpoint[1], checkpoint[2], checkpoint[3], checkpoint[4],
          checkpoint[5] or false}
end
