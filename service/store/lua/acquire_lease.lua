-- KEYS: head, lease, fence.  ARGV: holder, ttl ms.
-- Replies the fencing token and the incarnation of the selector the lease is on.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOTFOUND'}
end
if not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {'BUSY'}
end
return {'OK', redis.call('INCR', KEYS[3]), redis.call('HGET', KEYS[1], 'incarnation') or ''}
