-- Appends one or more entries to a stream's log, one after the other, exactly as APPEND does
-- for a selector (``append_entry``; the stream's group commit), and answers the reply of each
-- entry and the stream's attachments as of these appends: the selectors that will apply them.
-- KEYS: head, log, idems, name->index, index->name, attachments[, the pending set], then each
-- entry's record keys. ARGV: the number of entries, '1' when the pending set is given (each
-- attached selector is marked there, scored by the time, when an entry was appended; in a
-- cluster the set is in another slot, and the caller marks them), then per entry what APPEND
-- takes per entry. A stream being deleted (``closing``) refuses: 'CLOSING' for every entry.
-- uses: int, append_entry
local count = tonumber(ARGV[1])
local replies = {}
if redis.call('HEXISTS', KEYS[1], 'closing') == 1 then
  for e = 1, count do
    replies[e] = {'CLOSING'}
  end
  return {replies, {}}
end
local key_at, arg_at = 7, 3
if ARGV[2] ~= '' then
  key_at = 8
end
local appended = false
for e = 1, count do
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
local attached = redis.call('HGETALL', KEYS[6])
if appended and ARGV[2] ~= '' then
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for i = 1, #attached, 2 do
    redis.call('ZADD', KEYS[7], now_ms, attached[i])
  end
end
return {replies, attached}
