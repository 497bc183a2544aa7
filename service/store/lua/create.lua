-- KEYS: meta, head, names, staging, state0, blobs, checkpoint0, checkpoints; for an import
-- also: segments, name->index, index->name, their staged copies (absent when no item has a
-- name), then pairs of a staged segment and its key.
-- ARGV: meta json, names json or '', incarnation[, version, items seen[, cursor, entries,
-- stream, stream incarnation]].
-- A new selector starts at version 0 with nothing seen; an imported one at the archive's head;
-- one attached to a stream at the cursor ATTACH gave it, counting the stream's entries before
-- it as applied, and its head names the stream it reads.
-- ``staging`` holds what readers read of the first version, ``checkpoint0`` (written with a
-- short TTL) its whole state. Everything staged is put into place only if the name is free, and
-- dropped otherwise.
-- uses: now
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
local cursor = ARGV[6] or '0-0'
local entries = ARGV[7] or '0'
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[3], ARGV[2])
else
  redis.call('DEL', KEYS[3])
end
local now = now_str()
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'version', version, 'cursor', cursor, 'rows_seen', seen,
           'appended', seen, 'state_key', KEYS[5], 'updated_at', now, 'last_id', cursor,
           'entries', entries, 'applied', entries, 'checkpoint_key', KEYS[7],
           'checkpoint_version', version, 'checkpoint_cursor', cursor, 'checkpoint_items', seen,
           'incarnation', ARGV[3])
if ARGV[8] and ARGV[8] ~= '' then
  redis.call('HSET', KEYS[2], 'stream', ARGV[8], 'stream_incarnation', ARGV[9])
end
redis.call('SADD', KEYS[6], KEYS[5])
redis.call('SADD', KEYS[8], KEYS[7])
return {'OK', now}
