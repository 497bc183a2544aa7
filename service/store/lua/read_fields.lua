-- KEYS: head.  ARGV: state fields to read.
-- Replies the head's fields (``records.HEAD_FIELDS``, in order; false where absent), then
-- the state fields of its state key.
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
