-- One entry appended to a log (a selector's, or a stream's: the same layout), with its
-- idempotency record and the names of its items: ``append(K, A)`` with K = head, log, idems,
-- name->index, index->name[, the record's key, the record's key of an earlier release] and
-- A = payload, items, digest, idem id or '', ttl ms, most idem records, merge flag, the
-- incarnation checked against, then one name per item. What APPEND's header says. A head that
-- is attached to a stream refuses: 'ATTACHED' and the stream.
-- Needs int_str and now_ms: a script that uses this file uses int and now_ms first.
local function append(K, A)
  if redis.call('EXISTS', K[1]) == 0 then
    return {'NOTFOUND'}
  end
  local stream = redis.call('HGET', K[1], 'stream')
  if stream then  -- an attached selector reads its stream's log, never its own
    return {'ATTACHED', stream}
  end
  if A[8] ~= '' and redis.call('HGET', K[1], 'incarnation') ~= A[8] then
    return {'INCARNATION'}
  end
  for i = 6, #K do
    local rec = redis.call('HMGET', K[i], 'digest', 'log_id', 'applied_version', 'rows_seen',
                           'first', 'rejected')
    if rec[1] then
      if string.sub(A[3], 1, #rec[1]) ~= rec[1] then
        return {'MISMATCH'}
      end
      redis.call('HSET', K[i], 'digest', rec[1])
      return {'DUP', rec[2], rec[3], rec[4], rec[5], rec[6]}
    end
  end
  local first = tonumber(redis.call('HGET', K[1], 'appended') or '0')
  for i = 9, #A do
    local index = first + i - 9
    local owner = redis.call('HGET', K[4], A[i])
    if owner then
      return {'NAME_TAKEN', A[i], owner}
    end
    local number = string.match(A[i], '^f(%d+)$')
    if number and tonumber(number) ~= index then
      return {'NAME_RESERVED', A[i], int_str(index)}
    end
  end
  for i = 9, #A do
    local index = int_str(first + i - 9)
    redis.call('HSET', K[4], A[i], index)
    redis.call('HSET', K[5], index, A[i])
  end
  redis.call('HINCRBY', K[1], 'appended', A[2])
  if not redis.call('HGET', K[1], 'entries') then
    -- A head from before entries were counted: its log held exactly the pending entries.
    redis.call('HSET', K[1], 'entries', redis.call('XLEN', K[2]), 'applied', '0')
  end
  local first_str = int_str(first)
  local fields = {'payload', A[1], 'rows', A[2], 'first', first_str}
  if A[7] == '1' then
    table.insert(fields, 'merge')
    table.insert(fields, '1')
  end
  if A[4] ~= '' then
    table.insert(fields, 'idk')
    table.insert(fields, A[4])
  end
  local id = '*'
  local incarnation = redis.call('HGET', K[1], 'incarnation')
  if incarnation then
    local span = 4294967296
    local ms = now_ms()
    local last_ms, last_seq = string.match(redis.call('HGET', K[1], 'last_id') or '0-0',
                                           '^(%d+)-(%d+)$')
    local k = 0
    if tonumber(last_ms) >= ms then
      ms = tonumber(last_ms)
      k = math.floor(tonumber(last_seq) / span) + 1
      if k >= 1048576 then  -- a clock far behind the last id: move on rather than overflow
        ms = ms + 1
        k = 0
      end
    end
    local ms_str = int_str(ms)
    local seed = incarnation .. ':' .. ms_str .. ':' .. int_str(k)
    local tag = tonumber(string.sub(redis.sha1hex(seed), 1, 8), 16)
    id = ms_str .. '-' .. int_str(k * span + tag)
  end
  id = redis.call('XADD', K[2], id, unpack(fields))
  redis.call('HINCRBY', K[1], 'entries', 1)
  redis.call('HSET', K[1], 'last_id', id)
  if #K < 6 then
    return {'NEW', id, first_str}
  end
  redis.call('HSET', K[6], 'digest', string.sub(A[3], 1, 32), 'log_id', id, 'first', first_str)
  redis.call('PEXPIRE', K[6], A[5])
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', K[3], '-inf', int_str(now))
  -- Ordered by expiry, and within one millisecond by arrival (the entry count's last three
  -- digits as thousandths), so that the oldest are forgotten first.
  local arrival = tonumber(redis.call('HGET', K[1], 'entries')) % 1000
  redis.call('ZADD', K[3], string.format('%.0f.%03d', now + tonumber(A[5]), arrival),
             A[4])
  local excess = redis.call('ZCARD', K[3]) - tonumber(A[6])
  if excess > 0 then
    local records = string.sub(K[1], 1, -5) .. 'idem:'
    local oldest = redis.call('ZPOPMIN', K[3], excess)
    for i = 1, #oldest, 2 do
      if string.find(oldest[i], '{', 1, true) then
        redis.call('UNLINK', oldest[i])
      else
        redis.call('UNLINK', records .. oldest[i])
      end
    end
  end
  return {'NEW', id, first_str}
end
