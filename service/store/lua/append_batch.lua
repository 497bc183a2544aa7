-- append_batch(key_at, arg_at): APPEND and STREAM_APPEND's loop over the entries of one group
-- commit. KEYS[1..5] are the log's head, log, idems, name->index, index->name; each entry's
-- record keys start at KEYS[key_at], its arguments at ARGV[arg_at] (record keys, names, then
-- what ``append`` takes). Returns the reply of each entry, and whether one was new. Scripts
-- that use it put ``append_entry`` (and what that needs) before it.
local function append_batch(key_at, arg_at)
  local replies = {}
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
  return replies, appended
end
