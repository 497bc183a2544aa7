-- KEYS: meta, head, names, log, lease, fence, blobs, idems, name->index, index->name,
-- segments, checkpoints, then any other key of the selector (rejected, rejected_order,
-- attempts, history, commits, the baseline and the alerts' keys). ARGV: '', or (an expiry)
-- the ``updated_at`` the head must still have, with nothing pending; the channel of commit
-- notices and the selector's name. Returns 1 if the selector existed (-1: not idle after all).
-- A deletion is announced on the commit channel (``records.DeletionNotice``): every replica
-- drops what it knows of the selector's head.
local existed = redis.call('EXISTS', KEYS[1]) + redis.call('EXISTS', KEYS[2])
local incarnation = redis.call('HGET', KEYS[2], 'incarnation')
if ARGV[1] ~= '' then
  -- An expiry: only a selector still idle since ARGV[1] (its last commit) with nothing pending.
  local head = redis.call('HMGET', KEYS[2], 'updated_at', 'entries', 'applied')
  if head[1] ~= ARGV[1] or (head[2] or '0') ~= (head[3] or '0') then
    return -1
  end
end
for _, set in ipairs({KEYS[7], KEYS[11], KEYS[12]}) do
  for _, k in ipairs(redis.call('SMEMBERS', set)) do
    redis.call('UNLINK', k)
  end
end
local records = string.sub(KEYS[2], 1, -5) .. 'idem:'
for _, member in ipairs(redis.call('ZRANGE', KEYS[8], 0, -1)) do
  if string.find(member, '{', 1, true) then
    redis.call('UNLINK', member)
  else
    redis.call('UNLINK', records .. member)
  end
end
redis.call('UNLINK', unpack(KEYS))
if existed > 0 then
  redis.call('PUBLISH', ARGV[2], table.concat({ARGV[3], incarnation or '', 'deleted'}, '	'))
  return 1
end
return 0
