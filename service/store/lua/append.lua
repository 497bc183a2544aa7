-- Appends one or more entries to a selector's log, one after the other, exactly as that many
-- calls would (``group_commit``), and answers a reply per entry.
-- KEYS: head, log, idems, name->index, index->name[, the pending set], then each entry's
-- [idem record, the record's key of an earlier release].
-- ARGV: the number of entries, the selector's name when the pending set is given (it marks
-- the selector there, scored by the time, when an entry was appended; '' otherwise: in a
-- cluster the set is in another slot, and the caller marks it), then per entry: its number of
-- record keys (0 or 2), its number of names, payload, items, digest, idem id or '', ttl ms,
-- most idem records, merge flag ('1' or '0'), the incarnation the chunk was checked against
-- ('' for any), then one name per item (or none). A chunk checked against another incarnation
-- (the name deleted and created again since the writer described it) is refused:
-- 'INCARNATION'.
-- The head's ``appended`` counter numbers the items (rows or feature columns) in log order, so
-- an entry knows the stream position of its first item before it is applied. Names are checked
-- and registered here, atomically with the append: no two features ever share a name, and
-- ``f<i>`` (the name shown for an unnamed feature ``i``) may only name feature ``i``.
-- A log id is ``<ms>-<k * 2^32 + tag>`` (``keys.log_id_tag``): the Redis clock in ms (never
-- behind the previous id), ``k`` the entries before it in that ms, and a tag of the
-- selector's incarnation, so that a log id of another selector, or of an earlier selector of
-- the same name, is known not to be this one's. (A head of an earlier release has no
-- incarnation: its ids stay Redis's own.)
-- A record holds the first 32 hex digits of the body's digest (an earlier release's, all 64;
-- either is compared as a prefix). Records expire after their TTL, and beyond ``most idem
-- records`` per selector the oldest are dropped at once: their memory is bounded either way. A
-- repeated key whose entry was rejected answers its reason. A repeated key rewrites its record's
-- digest (the same value): a write, so that a WAIT after it (SIFT_REDIS_WAIT_REPLICAS) covers
-- the first append too.
-- uses: int
local function append(K, A)
  if redis.call('EXISTS', K[1]) == 0 then
    return {'NOTFOUND'}
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
    local t = redis.call('TIME')
    local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', K[3], '-inf', int_str(now_ms))
  -- Ordered by expiry, and within one millisecond by arrival (the entry count's last three
  -- digits as thousandths), so that the oldest are forgotten first.
  local arrival = tonumber(redis.call('HGET', K[1], 'entries')) % 1000
  redis.call('ZADD', K[3], string.format('%.0f.%03d', now_ms + tonumber(A[5]), arrival),
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
local replies = {}
local key_at, arg_at = 6, 3
if ARGV[2] ~= '' then
  key_at = 7
end
local appended = false
for e = 1, tonumber(ARGV[1]) do
  local record_keys, names = tonumber(ARGV[arg_at]), tonumber(ARGV[arg_at + 1])
  local K = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]}
  for i = 1, record_keys do
    K[5 + i] = KEYS[key_at + i - 1]
  end
  local A = {}
  for i = 1, 8 + names do
    A[i] = ARGV[arg_at + 1 + i]
  end
  replies[e] = append(K, A)
  appended = appended or replies[e][1] == 'NEW'
  key_at = key_at + record_keys
  arg_at = arg_at + 10 + names
end
if appended and ARGV[2] ~= '' then
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[6], now_ms, ARGV[2])
end
return replies
