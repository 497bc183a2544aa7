"""The Lua scripts of the store: every multi-key step that must be atomic.

All keys a script touches belong to one selector and share its hash tag, so each script runs in a
single slot on Redis Cluster. Keys reached through a set (state blobs, idempotency records) are
not declared in KEYS; they carry the same hash tag, which Redis Cluster tolerates in practice.
Replies are arrays whose first element is a status word; ``redis.call('TIME')`` is used as the
clock so every replica of the service agrees on ``updated_at`` (Redis 7 replicates effects).
"""

from __future__ import annotations

#: Lua prints numbers with "%.14g": 10^14 would become "1e+14". Integers go out through this.
_INT = """
local function int_str(n)
  return string.format('%.0f', n)
end
"""

_NOW = """
local function now_str()
  local t = redis.call('TIME')
  return t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
end
"""

#: KEYS: meta, head, names, staging, state0, blobs, checkpoint0, checkpoints; for an import
#: also: segments, name->index, index->name, their staged copies (absent when no item has a
#: name), then pairs of a staged segment and its key.
#: ARGV: meta json, names json or '', incarnation[, version, items seen].
#: A new selector starts at version 0 with nothing seen; an imported one at the archive's head.
#: ``staging`` holds what readers read of the first version, ``checkpoint0`` (written with a
#: short TTL) its whole state. Everything staged is put into place only if the name is free, and
#: dropped otherwise.
CREATE = (
    _NOW
    + """
local function drop_staged()
  redis.call('DEL', KEYS[4], KEYS[7])
  for i = 12, #KEYS do
    if i <= 13 or i % 2 == 0 then redis.call('DEL', KEYS[i]) end
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then
  drop_staged()
  return {'CONFLICT'}
end
if redis.call('EXISTS', KEYS[4]) == 0 or redis.call('EXISTS', KEYS[7]) == 0 then
  drop_staged()
  return {'STAGING_LOST'}
end
for i = 14, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    drop_staged()
    return {'STAGING_LOST'}
  end
end
redis.call('RENAME', KEYS[4], KEYS[5])
redis.call('PERSIST', KEYS[5])
redis.call('PERSIST', KEYS[7])
for i = 12, 13 do
  if i <= #KEYS and redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('RENAME', KEYS[i], KEYS[i - 2])
    redis.call('PERSIST', KEYS[i - 2])
  end
end
for i = 14, #KEYS, 2 do
  redis.call('RENAME', KEYS[i], KEYS[i + 1])
  redis.call('PERSIST', KEYS[i + 1])
  redis.call('SADD', KEYS[9], KEYS[i + 1])
end
local version = ARGV[4] or '0'
local seen = ARGV[5] or '0'
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[3], ARGV[2])
else
  redis.call('DEL', KEYS[3])
end
local now = now_str()
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'version', version, 'cursor', '0-0', 'rows_seen', seen,
           'appended', seen, 'state_key', KEYS[5], 'updated_at', now, 'last_id', '0-0',
           'entries', '0', 'applied', '0', 'checkpoint_key', KEYS[7],
           'checkpoint_version', version, 'checkpoint_cursor', '0-0', 'checkpoint_items', seen,
           'incarnation', ARGV[3])
redis.call('SADD', KEYS[6], KEYS[5])
redis.call('SADD', KEYS[8], KEYS[7])
return {'OK', now}
"""
)

#: KEYS: staging.  ARGV: ttl ms, then field, value pairs.
#: What a ``create`` stages for readers of its first version, whole and with its TTL at once
#: (a script, not MULTI: redis-py's cluster client cannot run transactions on the service's
#: event loop).
STAGE = """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""

#: KEYS: meta, head, names, log, lease, fence, blobs, idems, name->index, index->name,
#: segments, checkpoints, then any other key of the selector (rejected, rejected_order,
#: attempts, history, commits). ARGV: nothing, or (an expiry) the ``updated_at`` the head must
#: still have, with nothing pending. Returns 1 if the selector existed (-1: not idle after all).
DELETE = """
local existed = redis.call('EXISTS', KEYS[1]) + redis.call('EXISTS', KEYS[2])
if ARGV[1] and ARGV[1] ~= '' then
  -- An expiry: only a selector still idle since ARGV[1] (its last commit) with nothing pending.
  local head = redis.call('HMGET', KEYS[2], 'updated_at', 'entries', 'applied')
  if head[1] ~= ARGV[1] or (head[2] or '0') ~= (head[3] or '0') then
    return -1
  end
end
for _, set in ipairs({KEYS[7], KEYS[11], KEYS[12]}) do
  for _, k in ipairs(redis.call('SMEMBERS', set)) do
    redis.call('UNLINK', k)
  end
end
local records = string.sub(KEYS[2], 1, -5) .. 'idem:'
for _, member in ipairs(redis.call('ZRANGE', KEYS[8], 0, -1)) do
  if string.find(member, '{', 1, true) then
    redis.call('UNLINK', member)
  else
    redis.call('UNLINK', records .. member)
  end
end
redis.call('UNLINK', unpack(KEYS))
if existed > 0 then return 1 end
return 0
"""

#: Appends one or more entries to a selector's log, one after the other, exactly as that many
#: calls would (``group_commit``), and answers a reply per entry.
#: KEYS: head, log, idems, name->index, index->name[, the pending set], then each entry's
#: [idem record, the record's key of an earlier release].
#: ARGV: the number of entries, the selector's name when the pending set is given (it marks
#: the selector there, scored by the time, when an entry was appended; '' otherwise: in a
#: cluster the set is in another slot, and the caller marks it), then per entry: its number of
#: record keys (0 or 2), its number of names, payload, items, digest, idem id or '', ttl ms,
#: most idem records, merge flag ('1' or '0'), the incarnation the chunk was checked against
#: ('' for any), then one name per item (or none). A chunk checked against another incarnation
#: (the name deleted and created again since the writer described it) is refused:
#: 'INCARNATION'.
#: The head's ``appended`` counter numbers the items (rows or feature columns) in log order, so
#: an entry knows the stream position of its first item before it is applied. Names are checked
#: and registered here, atomically with the append: no two features ever share a name, and
#: ``f<i>`` (the name shown for an unnamed feature ``i``) may only name feature ``i``.
#: A log id is ``<ms>-<k * 2^32 + tag>`` (``keys.log_id_tag``): the Redis clock in ms (never
#: behind the previous id), ``k`` the entries before it in that ms, and a tag of the
#: selector's incarnation, so that a log id of another selector, or of an earlier selector of
#: the same name, is known not to be this one's. (A head of an earlier release has no
#: incarnation: its ids stay Redis's own.)
#: A record holds the first 32 hex digits of the body's digest (an earlier release's, all 64;
#: either is compared as a prefix). Records expire after their TTL, and beyond ``most idem
#: records`` per selector the oldest are dropped at once: their memory is bounded either way. A
#: repeated key whose entry was rejected answers its reason. A repeated key rewrites its record's
#: digest (the same value): a write, so that a WAIT after it (SIFT_REDIS_WAIT_REPLICAS) covers
#: the first append too.
APPEND = (
    _INT
    + """
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
"""
)

#: KEYS: attempts.  ARGV: lease holders.
#: Take back the last attempt of each holder: it made no progress, but its process is alive and
#: knows that the entry was not why (Redis was away or slow, the lease was lost, the process is
#: shutting down). Only attempts nobody takes back count against an entry (see ``TAKE``).
_FORGIVE = """
local function forgive(attempts, first_holder, last_holder)
  for i = first_holder, last_holder do
    local by = 'by:' .. ARGV[i]
    local entry = redis.call('HGET', attempts, by)
    if entry then
      if tonumber(redis.call('HGET', attempts, entry) or '0') > 0 then
        redis.call('HINCRBY', attempts, entry, -1)
      end
      redis.call('HDEL', attempts, by)
    end
  end
end
"""

FORGIVE_ATTEMPTS = (
    _FORGIVE
    + """
forgive(KEYS[1], 1, #ARGV)
return 1
"""
)

#: KEYS: head, log, attempts, lease.  ARGV: after (stream id), count, lease holder, how many
#: holders follow, the holders whose last attempts are taken back (``FORGIVE_ATTEMPTS``), then
#: the ids of entries whose chunks the caller holds already (handed over by the process that
#: appended them): their payloads are left out of the reply ('' instead).
#: The applier's read of its next batch: up to ``count`` entries after ``after``, and how many
#: times an applier has now started on the first of them (counted here, before computing, so
#: that a chunk which kills the applying process is still counted; every commit clears them).
#: Only the lease holder reads: an applier that lost its lease (or whose selector was deleted,
#: and perhaps created again) learns it here instead of computing for nothing.
TAKE = (
    _FORGIVE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOTFOUND'}
end
if redis.call('GET', KEYS[4]) ~= ARGV[3] then
  return {'LEASE'}
end
local holders = tonumber(ARGV[4])
forgive(KEYS[3], 5, 4 + holders)
local entries = redis.call('XRANGE', KEYS[2], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
if #entries == 0 then
  return {'OK', 0, entries}
end
if #ARGV > 4 + holders then
  local held = {}
  for i = 5 + holders, #ARGV do
    held[ARGV[i]] = true
  end
  for _, entry in ipairs(entries) do
    if held[entry[1]] then
      local fields = entry[2]
      for i = 1, #fields, 2 do
        if fields[i] == 'payload' then
          fields[i + 1] = ''
        end
      end
    end
  end
end
local attempts = redis.call('HINCRBY', KEYS[3], entries[1][1], 1)
redis.call('HSET', KEYS[3], 'by:' .. ARGV[3], entries[1][1])
return {'OK', attempts, entries}
"""
)

#: KEYS: head, lease, fence.  ARGV: holder, ttl ms.
#: Replies the fencing token and the incarnation of the selector the lease is on.
ACQUIRE_LEASE = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOTFOUND'}
end
if not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {'BUSY'}
end
return {'OK', redis.call('INCR', KEYS[3]), redis.call('HGET', KEYS[1], 'incarnation') or ''}
"""

#: KEYS: lease, fence.  ARGV: holder, token, ttl ms.
RENEW_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
"""

#: KEYS: lease.  ARGV: holder.
RELEASE_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

_STREAM_IDS = """
local function cmp_num(x, y)
  if #x ~= #y then
    if #x < #y then return -1 end
    return 1
  end
  if x == y then return 0 end
  if x < y then return -1 end
  return 1
end
local function cmp_id(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  local c = cmp_num(am, bm)
  if c ~= 0 then return c end
  return cmp_num(as, bs)
end
"""

#: KEYS: head, lease, fence, blobs, commits, new state, rejected, rejected_order, attempts,
#: checkpoints, history, log, then idem keys.
#: ARGV: holder, token, expected version, cursor, rows_seen, entries committed past, writer
#: field, rejections (JSON list of [log id, reason JSON, index in KEYS of its idem key or 0]),
#: most rejections kept, history entry (JSON object without updated_at, or ''), history length,
#: the channel of commit notices and the selector's name, then the new version's published
#: fields as field, value pairs (written into the new state key only once every check passed:
#: a stale applier writes nothing).
#: Every commit is announced on the channel (``redis_store.CommitNotice``): what waiters of
#: every replica wait for, instead of reading the head again and again.
#: Idem keys not named by a rejection belong to applied entries.
#: The log is not trimmed here: it is the truth until a checkpoint covers it (CHECKPOINT). The
#: commit record says how to replay it; a head of the earlier layout (no checkpoint) keeps its
#: whole-state hash as its checkpoint.
COMMIT = (
    _INT
    + _NOW
    + _STREAM_IDS
    + """
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
  local t = redis.call('TIME')
  local now_ms = int_str(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  for _, r in ipairs(rejections) do
    redis.call('HSET', KEYS[7], r[1], r[2])
    redis.call('ZADD', KEYS[8], now_ms, r[1])
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
for _, k in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  if k ~= KEYS[6] then
    redis.call('UNLINK', k)
    redis.call('SREM', KEYS[4], k)
  end
end
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
                                              ARGV[5], tostring(rejected_flag)}, '\t'))
return {'OK', version, now, checkpoint[1], checkpoint[2], checkpoint[3], checkpoint[4],
        checkpoint[5] or false}
"""
)

#: KEYS: head, lease, fence, checkpoints, log, commits, new checkpoint.
#: ARGV: holder, token, version, cursor, items seen.
#: Make the checkpoint (the whole state of ``version``, written piece by piece beforehand) the
#: one to recover from, if this applier still holds the lease and it is newer than the current
#: one; then drop what it makes unnecessary: older checkpoints, the log up to its cursor, and
#: the commit records up to its version.
CHECKPOINT = (
    _INT
    + _STREAM_IDS
    + """
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
for _, k in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  if k ~= KEYS[7] then
    redis.call('UNLINK', k)
    redis.call('SREM', KEYS[4], k)
  end
end
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
"""
)

#: KEYS: head.  ARGV: state fields to read.
#: Replies the head's fields (``redis_store.HEAD_FIELDS``, in order; false where absent), then
#: the state fields of its state key.
READ_FIELDS = """
local h = redis.call('HMGET', KEYS[1], 'version', 'cursor', 'rows_seen', 'state_key', 'updated_at',
                     'checkpoint_key', 'checkpoint_version', 'checkpoint_cursor',
                     'checkpoint_items', 'checkpoint_layout', 'incarnation')
if not h[1] then
  return {'NOTFOUND'}
end
local out = {'OK'}
for i = 1, 11 do
  out[1 + i] = h[i] or false
end
if #ARGV > 0 then
  if redis.call('EXISTS', h[4]) == 0 then
    return {'NOSTATE', h[4]}
  end
  local vals = redis.call('HMGET', h[4], unpack(ARGV))
  for i = 1, #ARGV do
    out[12 + i] = vals[i]
  end
end
return out
"""

#: KEYS: the pending set.  ARGV: name, score pairs.
#: Removes each name whose mark still has the score it had when the sweeper read it (an append
#: since has marked it again: it stays).
UNMARK_PENDING = """
local removed = 0
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
"""

#: KEYS: head, history.  ARGV: entry JSON, its version, entries kept.
#: Best effort after a commit: recorded only while the head is at that version or later (not
#: into a selector deleted, or deleted and created anew, since), newest first, capped.
RECORD_HISTORY = """
local version = redis.call('HGET', KEYS[1], 'version')
if not version or tonumber(version) < tonumber(ARGV[2]) then
  return 0
end
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
return 1
"""

ALL: dict[str, str] = {
    "stage": STAGE,
    "create": CREATE,
    "delete": DELETE,
    "append": APPEND,
    "take": TAKE,
    "forgive_attempts": FORGIVE_ATTEMPTS,
    "acquire_lease": ACQUIRE_LEASE,
    "renew_lease": RENEW_LEASE,
    "release_lease": RELEASE_LEASE,
    "commit": COMMIT,
    "checkpoint": CHECKPOINT,
    "read_fields": READ_FIELDS,
    "record_history": RECORD_HISTORY,
    "unmark_pending": UNMARK_PENDING,
}
