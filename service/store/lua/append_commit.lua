-- KEYS: head, lease, fence, blobs, commits, new state, rejected, rejected_order, attempts,
-- checkpoints, history, log (COMMIT's first twelve), then idems, name->index, index->name, the
-- new checkpoint's key (used only when the state is the checkpoint), then each entry's
-- [idem record, the record's key of an earlier release].
-- ARGV: COMMIT's first thirteen (its cursor, ARGV[4], is the head's cursor before: the new one
-- is the last entry appended here), the number of entries, the ARGV index at which the
-- published field, value pairs start, the ARGV index at which the checkpoint's field, value
-- pairs start ('0': no checkpoint), then per entry what APPEND takes for one (record keys,
-- names (always 0), payload, items, digest, idem id or '', ttl ms, most idem records, merge
-- flag, incarnation), then the published pairs, then the checkpoint's pairs.
-- The direct path of a chunk that its selector's applier computed before anything was written
-- (``DirectPath.submit``): its log entry, its idempotency record and the version that
-- applies it, in one script, so one fsync acknowledges it. The log stays the truth: the entries
-- are appended exactly as APPEND would and the commit record covers them, so a replay is the
-- same as for any other entry. When the new state is smaller than the chunks, the caller sends
-- the state instead of their payloads: the entries are appended without payload (their ids and
-- idempotency records as usual), and the state of the new version becomes the checkpoint in
-- the same script (CHECKPOINT's body: the log and the commit records it covers are dropped),
-- so nothing is left to replay that has no payload.
-- Refused before anything is written ('REFUSED' and why) unless the applier's lease and fence
-- are current, the head is at the version the update was computed from, nothing is pending in
-- the log (the update must follow every entry before it) and no entry's idempotency key was
-- seen before: the caller then appends as usual. Replies {'OK', COMMIT's reply, {{id, first},
-- ...}}.
-- uses: int, now, now_ms, stream_ids, keep_only, append_entry, commit_version, make_checkpoint
local head = redis.call('HMGET', KEYS[1], 'version', 'cursor', 'last_id', 'stream', 'incarnation')
if not head[1] then
  return {'NOTFOUND'}
end
if head[4] then
  return {'REFUSED', 'attached to a stream'}
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] or redis.call('GET', KEYS[3]) ~= ARGV[2] then
  return {'REFUSED', 'lease'}
end
if head[1] ~= ARGV[3] or head[2] ~= ARGV[4] then
  return {'REFUSED', 'version'}
end
if (head[3] or '0-0') ~= head[2] then
  return {'REFUSED', 'pending'}
end
local entries = tonumber(ARGV[14])
local key_at, arg_at = 17, 17
for e = 1, entries do
  local record_keys = tonumber(ARGV[arg_at])
  if tonumber(ARGV[arg_at + 1]) ~= 0 then
    return {'REFUSED', 'names'}
  end
  local incarnation = ARGV[arg_at + 9]
  if incarnation ~= '' and incarnation ~= head[5] then
    return {'REFUSED', 'incarnation'}
  end
  for i = 0, record_keys - 1 do
    if redis.call('EXISTS', KEYS[key_at + i]) == 1 then
      return {'REFUSED', 'idempotency key seen before'}
    end
  end
  key_at = key_at + record_keys
  arg_at = arg_at + 10
end

local appended = {}
local applied_records = {}
key_at, arg_at = 17, 17
for e = 1, entries do
  local record_keys = tonumber(ARGV[arg_at])
  local K = {KEYS[1], KEYS[12], KEYS[13], KEYS[14], KEYS[15]}
  for i = 1, record_keys do
    K[5 + i] = KEYS[key_at + i - 1]
    table.insert(applied_records, KEYS[key_at + i - 1])
  end
  local A = {}
  for i = 1, 8 do
    A[i] = ARGV[arg_at + 1 + i]
  end
  local reply = append(K, A)
  if reply[1] ~= 'NEW' then  -- cannot happen after the checks above; said, not hidden
    return redis.error_reply('APPEND_COMMIT: append answered ' .. tostring(reply[1]))
  end
  appended[e] = {reply[2], reply[3]}
  key_at = key_at + record_keys
  arg_at = arg_at + 10
end

local K = {}
for i = 1, 12 do
  K[i] = KEYS[i]
end
for _, record in ipairs(applied_records) do
  table.insert(K, record)
end
local A = {}
for i = 1, 13 do
  A[i] = ARGV[i]
end
A[4] = appended[entries][1]
local pieces_at = tonumber(ARGV[16])
local published_end = #ARGV
if pieces_at > 0 then
  published_end = pieces_at - 1
end
for i = tonumber(ARGV[15]), published_end do
  table.insert(A, ARGV[i])
end
local committed = commit_version(K, A)
if committed[1] ~= 'OK' then  -- checked above; said, not hidden
  return redis.error_reply('APPEND_COMMIT: commit answered ' .. tostring(committed[1]))
end
if pieces_at > 0 then
  redis.call('SADD', KEYS[10], KEYS[16])
  redis.call('HSET', KEYS[16], unpack(ARGV, pieces_at))
  local made = make_checkpoint({KEYS[1], KEYS[2], KEYS[3], KEYS[10], KEYS[12], KEYS[5], KEYS[16]},
                               {ARGV[1], ARGV[2], committed[2], A[4], ARGV[5]})
  if made[1] ~= 'OK' then  -- the version was just committed by this lease: cannot happen
    return redis.error_reply('APPEND_COMMIT: checkpoint answered ' .. tostring(made[1]))
  end
end
return {'OK', committed, appended}
