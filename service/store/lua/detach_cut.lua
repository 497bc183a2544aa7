-- KEYS: an attached selector's head, fence.  ARGV: the stream it is attached to, the cut
-- (a stream log id; '' for its cursor).
-- The second step of a detach, in the selector's slot: from here on the selector takes none
-- of its stream's entries after the cut (its leases read it; TAKE_ATTEMPT refuses a lease
-- taken before), and the fence moves, so that an applier that read entries before cannot
-- commit them. A cut the cursor has passed already (entries applied between the two steps)
-- is the cursor. Answers {'OK', cut}: the cut set by a detach begun before, if any.
-- uses: stream_ids
local head = redis.call('HMGET', KEYS[1], 'cursor', 'stream', 'stream_cut')
if not head[1] then
  return {'NOTFOUND'}
end
if head[2] ~= ARGV[1] then
  return {'NOTATTACHED'}
end
if head[3] then
  return {'OK', head[3]}
end
local cut = ARGV[2]
if cut == '' or cmp_id(cut, head[1]) < 0 then
  cut = head[1]
end
redis.call('HSET', KEYS[1], 'stream_cut', cut)
redis.call('INCR', KEYS[2])
return {'OK', cut}
