-- KEYS: head, lease, fence.  ARGV: holder, ttl ms.
-- Replies the fencing token, the incarnation of the selector the lease is on, the stream it
-- reads its entries from with that stream's incarnation ('' for a selector without one), and
-- the cut a detach set on that stream ('' for none: DETACH_CUT).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOTFOUND'}
end
if not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {'BUSY'}
end
local head = redis.call('HMGET', KEYS[1], 'incarnation', 'stream', 'stream_incarnation',
                        'stream_cut')
return {'OK', redis.call('INCR', KEYS[3]), head[1] or '', head[2] or '', head[3] or '',
        head[4] or ''}
