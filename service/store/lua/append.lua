-- Appends entries to a log (a selector's or a stream's: the same layout, ``append_entry``), one
-- after the other, exactly as that many calls would (``group_commit``), and answers a reply per
-- entry; with a source's step, commits the source's bus position in the same call.
-- KEYS: head, log, idems, name->index, index->name, the stream's attachments (a selector's head
-- again: a key of its slot), the log's sources, its source rejections[, the pending set], then
-- each entry's [idem record, the record's key of an earlier release].
-- ARGV: the number of entries, the target's kind ('selector' or 'stream'), the pending mark (''
-- when the pending set is not given: in a cluster it is in another slot, and the caller marks
-- it; else the selector's name, or '*' for a stream: every attached selector, marked there,
-- scored by the time, when an entry was appended), the number s of the source step's arguments
-- (0: no source), the s arguments, then per entry: its number of record keys (0 or 2), its
-- number of names, payload, items, digest, idem id or '', ttl ms, most idem records, merge flag
-- ('1' or '0'), the incarnation the chunk was checked against ('' for any), then one name per
-- item (or none).
-- A source's step (what ``service/sources`` read from its bus, with the entry of its good
-- rows): source name, source id, partition, the position expected, the new position, the
-- entries of the partition before its start ('' to leave it; what its lag counts from), entries
-- consumed, rows, the most rejections kept, the number of rejections n, then n rejections
-- (JSON). The position is compared and set here, so a consumer that died after the append and a
-- second consumer that read the same entries can never append them again: exactly once from
-- the bus to the log. Nothing is written unless the source exists with that id ({'GONE'}), the
-- position is the one expected ({'MOVED', position}) and its entry is appended ({'APPEND'}: the
-- entry's reply says why not).
-- Replies {the reply of each entry, the stream's attachments as of these appends (flat; {} for
-- a selector): the selectors that will apply them, the source's reply ('' without a source;
-- {'OK', its progress as now recorded (JSON)})}.
-- An entry's reply: {'NEW', log id, first}; {'DUP', log id, applied version, rows seen, first,
-- rejected}; or a refusal: 'NOTFOUND', 'INCARNATION' (a chunk checked against another
-- incarnation: the name deleted and created again since the writer described it), 'ATTACHED'
-- and the stream (a selector attached to a stream reads the stream's log), 'MISMATCH',
-- 'NAME_TAKEN', 'NAME_RESERVED', and 'CLOSING' for every entry of a stream being deleted.
-- The head's ``appended`` counter numbers the items (rows or feature columns) in log order, so
-- an entry knows the stream position of its first item before it is applied. Names are checked
-- and registered here, atomically with the append: no two features ever share a name, and
-- ``f<i>`` (the name shown for an unnamed feature ``i``) may only name feature ``i``.
-- A log id is ``<ms>-<k * 2^32 + tag>`` (``keys.log_id_tag``): the Redis clock in ms (never
-- behind the previous id), ``k`` the entries before it in that ms, and a tag of the
-- log's incarnation, so that a log id of another selector, or of an earlier selector of
-- the same name, is known not to be this one's. (A head of an earlier release has no
-- incarnation: its ids stay Redis's own.)
-- A record holds the first 32 hex digits of the body's digest (an earlier release's, all 64;
-- either is compared as a prefix). Records expire after their TTL, and beyond ``most idem
-- records`` per log the oldest are dropped at once: their memory is bounded either way. A
-- repeated key whose entry was rejected answers its reason. A repeated key rewrites its record's
-- digest (the same value): a write, so that a WAIT after it (SIFT_REDIS_WAIT_REPLICAS) covers
-- the first append too.
-- uses: int, now_ms, append_entry
local entries = tonumber(ARGV[1])
local stream = ARGV[2] == 'stream'
local mark = ARGV[3]
local s = tonumber(ARGV[4])

local record
if s > 0 then
  local raw = redis.call('HGET', KEYS[7], ARGV[5])
  if not raw then
    return {{}, {}, {'GONE'}}
  end
  record = cjson.decode(raw)
  if record['id'] ~= ARGV[6] then
    return {{}, {}, {'GONE'}}
  end
  local current = record['positions'][ARGV[7]] or ''
  if current ~= ARGV[8] then
    return {{}, {}, {'MOVED', current}}
  end
end

local replies = {}
local appended = false
if stream and redis.call('HEXISTS', KEYS[1], 'closing') == 1 then
  for e = 1, entries do
    replies[e] = {'CLOSING'}
  end
else
  local key_at = 9
  if mark ~= '' then
    key_at = 10
  end
  local arg_at = 5 + s
  for e = 1, entries do
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
end

local attached = {}
if stream then
  attached = redis.call('HGETALL', KEYS[6])
end
if record then
  for e = 1, entries do
    if replies[e][1] ~= 'NEW' then
      return {replies, attached, {'APPEND'}}
    end
  end
end
if appended and mark ~= '' then
  local now = now_ms()
  if stream then
    for i = 1, #attached, 2 do
      redis.call('ZADD', KEYS[9], now, attached[i])
    end
  else
    redis.call('ZADD', KEYS[9], now, mark)
  end
end
if not record then
  return {replies, attached, ''}
end

local now = now_ms()
local partition, n_rejected = ARGV[7], tonumber(ARGV[14])
for i = 1, n_rejected do
  redis.call('LPUSH', KEYS[8], ARGV[14 + i])
end
if n_rejected > 0 then
  redis.call('LTRIM', KEYS[8], 0, tonumber(ARGV[13]) - 1)
end
record['positions'][partition] = ARGV[9]
if ARGV[10] ~= '' then
  local before = record['before'] or {}
  before[partition] = tonumber(ARGV[10])
  record['before'] = before
end
record['entries'] = (record['entries'] or 0) + tonumber(ARGV[11])
record['rows'] = (record['rows'] or 0) + tonumber(ARGV[12])
record['rejected'] = (record['rejected'] or 0) + n_rejected
record['updated_at'] = now / 1000
local encoded = cjson.encode(record)
redis.call('HSET', KEYS[7], ARGV[5], encoded)
return {replies, attached, {'OK', encoded}}
