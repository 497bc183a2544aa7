-- KEYS: a stream's meta, head, names, log, idems, name->index, index->name, attachments,
-- then its other keys (the detaching selectors among them).
-- ARGV: 'close' or 'delete', then the index in KEYS of the detaching selectors.
-- 'close' (a forced delete begins): no more appends nor attachments; answers the selectors
-- attached or being detached.
-- 'delete': removes every key of the stream, only when no selector is attached nor being
-- detached ('ATTACHED' and their names otherwise). Returns {'OK', 1} if the stream existed.
local detaching = KEYS[tonumber(ARGV[2])]
local function held()
  local names = redis.call('HKEYS', KEYS[8])
  for _, name in ipairs(redis.call('HKEYS', detaching)) do
    table.insert(names, name)
  end
  return names
end
if ARGV[1] == 'close' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return {'NOTFOUND'}
  end
  redis.call('HSET', KEYS[2], 'closing', '1')
  return {'OK', held()}
end
local attached = held()
if #attached > 0 then
  return {'ATTACHED', attached}
end
local existed = redis.call('EXISTS', KEYS[1]) + redis.call('EXISTS', KEYS[2])
local records = string.sub(KEYS[2], 1, -5) .. 'idem:'
for _, member in ipairs(redis.call('ZRANGE', KEYS[5], 0, -1)) do
  redis.call('UNLINK', records .. member)
end
redis.call('UNLINK', unpack(KEYS))
return {'OK', existed}
