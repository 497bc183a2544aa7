-- KEYS: head, lease, fence, blobs, commits, new state, rejected, rejected_order, attempts,
-- checkpoints, history, log, then idem keys.
-- ARGV: holder, token, expected version, cursor, rows_seen, entries committed past, writer
-- field, rejections (JSON list of [log id, reason JSON, index in KEYS of its idem key or 0]),
-- most rejections kept, history entry (JSON object without updated_at, or ''), history length,
-- the channel of commit notices and the selector's name, then the new version's published
-- fields as field, value pairs (written into the new state key only once every check passed:
-- a stale applier writes nothing).
-- Every commit is announced on the channel (``records.CommitNotice``): what waiters of
-- every replica wait for, instead of reading the head again and again.
-- Idem keys not named by a rejection belong to applied entries.
-- The log is not trimmed here: it is the truth until a checkpoint covers it (CHECKPOINT). The
-- commit record says how to replay it; a head of the earlier layout (no checkpoint) keeps its
-- whole-state hash as its checkpoint.
-- uses: int, now, now_ms, stream_ids, keep_only
local head = redis.call('HMGET', KEYS[1], 'version', 'cursor', 'state_key', 'rows_seen',
                        'checkpoint_key')
if not head[1] then
  return {'NOTFOUND'}
end
local holder = redis.call('GET', KEYS[2])
if holder ~= ARGV[1] then
  return {'LEASE', holder or ''}
end
local fence = redis.call('GET', KEYS[3])
if fence ~= ARGV[2] then
  return {'FENCED', fence or ''}
end
if head[1] ~= ARGV[3] then
  return {'VERSION', head[1]}
end
if cmp_id(ARGV[4], head[2]) < 0 then
  return {'CURSOR', head[2]}
end

redis.call('DEL', KEYS[6])
redis.call('HSET', KEYS[6], ARGV[7], ARGV[1], unpack(ARGV, 14))
redis.call('SADD', KEYS[4], KEYS[6])
if not head[5] then
  -- Earlier layout: the current state hash holds the whole state; it becomes the checkpoint.
  redis.call('HSET', KEYS[1], 'checkpoint_key', head[3], 'checkpoint_version', head[1],
             'checkpoint_cursor', head[2], 'checkpoint_items', head[4],
             'checkpoint_layout', 'whole')
  redis.call('SREM', KEYS[4], head[3])
  redis.call('SADD', KEYS[10], head[3])
  if not redis.call('HGET', KEYS[1], 'entries') then
    redis.call('HSET', KEYS[1], 'entries', redis.call('XLEN', KEYS[12]), 'applied', '0')
  end
end
local version = int_str(tonumber(head[1]) + 1)
local now = now_str()
redis.call('HSET', KEYS[1], 'version', version, 'cursor', ARGV[4], 'rows_seen', ARGV[5],
           'state_key', KEYS[6], 'updated_at', now)
redis.call('HINCRBY', KEYS[1], 'applied', ARGV[6])
local rejected_idem = {}
local rejections = cjson.decode(ARGV[8])
if #rejections > 0 then
  local rejected_at = int_str(now_ms())
  for _, r in ipairs(rejections) do
    redis.call('HSET', KEYS[7], r[1], r[2])
    redis.call('ZADD', KEYS[8], rejected_at, r[1])
    local idem = tonumber(r[3])
    if idem > 0 then
      rejected_idem[idem] = true
      if redis.call('EXISTS', KEYS[idem]) == 1 then
        redis.call('HSET', KEYS[idem], 'rejected', r[2])
      end
    end
  end
  local excess = redis.call('ZCARD', KEYS[8]) - tonumber(ARGV[9])
  if excess > 0 then
    local oldest = redis.call('ZPOPMIN', KEYS[8], excess)
    for i = 1, #oldest, 2 do
      redis.call('HDEL', KEYS[7], oldest[i])
    end
  end
end
for i = 13, #KEYS do
  if not rejected_idem[i] and redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('HSET', KEYS[i], 'applied_version', version, 'rows_seen', ARGV[5])
  end
end
redis.call('DEL', KEYS[9])
keep_only(KEYS[4], KEYS[6])
local rejected_flag = 0
if #rejections > 0 then rejected_flag = 1 end
redis.call('RPUSH', KEYS[5], '[' .. version .. ',"' .. ARGV[4] .. '",' .. rejected_flag .. ']')
if ARGV[10] ~= '' then
  local entry = string.sub(ARGV[10], 1, -2) .. ',"updated_at":' .. now .. '}'
  redis.call('LPUSH', KEYS[11], entry)
  redis.call('LTRIM', KEYS[11], 0, tonumber(ARGV[11]) - 1)
end
local checkpoint = redis.call('HMGET', KEYS[1], 'checkpoint_key', 'checkpoint_version',
                              'checkpoint_cursor', 'checkpoint_items', 'checkpoint_layout',
                              'incarnation')
redis.call('PUBLISH', ARGV[12], table.concat({ARGV[13], checkpoint[6] or '', version, ARGV[4],
                                              ARGV[5], tostring(rejected_flag)}, '	'))
return {'OK', version, now, checkpoint[1], checkpoint[2], checkpoint[3], checkpoint[4],
        checkpoint[5] or false}
