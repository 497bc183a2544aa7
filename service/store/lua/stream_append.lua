-- Appends one or more entries to a stream's log, one after the other, exactly as APPEND does
-- for a selector (``append_entry``; the stream's group commit), and answers the reply of each
-- entry and the stream's attachments as of these appends: the selectors that will apply them.
-- KEYS: head, log, idems, name->index, index->name, attachments[, the pending set], then each
-- entry's record keys. ARGV: the number of entries, '1' when the pending set is given (each
-- attached selector is marked there, scored by the time, when an entry was appended; in a
-- cluster the set is in another slot, and the caller marks them), then per entry what APPEND
-- takes per entry. A stream being deleted (``closing``) refuses: 'CLOSING' for every entry.
-- uses: int, now_ms, append_entry, append_batch
if redis.call('HEXISTS', KEYS[1], 'closing') == 1 then
  local replies = {}
  for e = 1, tonumber(ARGV[1]) do
    replies[e] = {'CLOSING'}
  end
  return {replies, {}}
end
local key_at = 7
if ARGV[2] ~= '' then
  key_at = 8
end
local replies, appended = append_batch(key_at, 3)
local attached = redis.call('HGETALL', KEYS[6])
if appended and ARGV[2] ~= '' then
  local now = now_ms()
  for i = 1, #attached, 2 do
    redis.call('ZADD', KEYS[7], now, attached[i])
  end
end
return {replies, attached}
