-- A source stopped at a bus reset restarted by an operator: each partition it holds
-- (``halted``, set by ``source_position.lua``) forgets its position, the entries before it and
-- its incarnation, and takes ``start`` as where its next read begins (resolved by the consumer
-- at its next step, as a new source's start is, and recorded with the new incarnation); the
-- reset events that stopped it say when and from where it was restarted.
-- KEYS: the target's sources (hash: source name -> JSON).
-- ARGV: source name, source id, the start option.
-- Replies: {'GONE'} (no such source here); {'RUNNING'} (no partition stopped at a reset);
-- {'OK', the partitions restarted (flat), the source's progress as now recorded (JSON)}.
-- uses: now_ms, table_field
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return {'GONE'}
end
local record = cjson.decode(raw)
if record['id'] ~= ARGV[2] then
  return {'GONE'}
end
local halted = record['halted']
local restarted = {}
if type(halted) == 'table' then
  for partition, _ in pairs(halted) do
    restarted[#restarted + 1] = partition
  end
end
if #restarted == 0 then
  return {'RUNNING'}
end
for _, partition in ipairs(restarted) do
  record['positions'][partition] = nil
  table_field(record, 'before')[partition] = nil
  table_field(record, 'epochs')[partition] = nil
  table_field(record, 'starts')[partition] = ARGV[3]
end
for _, event in ipairs(table_field(record, 'resets')) do
  if halted[event['partition']] and event['action'] == 'stopped' and not event['restarted_at'] then
    event['restarted_at'] = now_ms() / 1000
    event['restarted_from'] = ARGV[3]
  end
end
record['halted'] = {}
local encoded = cjson.encode(record)
redis.call('HSET', KEYS[1], ARGV[1], encoded)
return {'OK', restarted, encoded}
