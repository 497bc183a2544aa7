-- KEYS: an attached selector's head, fence, meta, name->index, index->name.
-- ARGV: the stream it is attached to, its description without the stream (JSON), then index,
-- name pairs: the names its features were given on arrival in the stream, in its own numbering.
-- Makes the selector standalone: its log from now on is its own (new ids after its cursor,
-- and after its cut: DETACH_CUT), its names its own. Only once its checkpoint is its current
-- version ('UNSETTLED' otherwise, with both versions): it never replays from the stream again.
-- The fence moves, so that an applier that read stream entries before cannot commit them
-- after.
-- uses: stream_ids
local head = redis.call('HMGET', KEYS[1], 'version', 'checkpoint_version', 'stream', 'cursor',
                        'last_id', 'rows_seen', 'applied', 'stream_cut')
if not head[1] then
  return {'NOTFOUND'}
end
if head[3] ~= ARGV[1] then
  return {'NOTATTACHED'}
end
if head[2] ~= head[1] then
  return {'UNSETTLED', head[1], head[2] or ''}
end
local last = head[4]
if head[8] and cmp_id(head[8], last) > 0 then
  last = head[8]
end
redis.call('HDEL', KEYS[1], 'stream', 'stream_incarnation', 'stream_cut')
redis.call('HSET', KEYS[1], 'last_id', last, 'appended', head[6], 'entries', head[7] or '0',
           'applied', head[7] or '0')
redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[3], ARGV[2])
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[4], ARGV[i + 1], ARGV[i])
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
end
return {'OK'}
