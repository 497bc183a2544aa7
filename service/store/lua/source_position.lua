-- A source's position in one bus partition moved without an append, in the record its commits
-- (``append.lua``) move: the first position (where its start resolved), the incarnation of
-- the partition it reads (``epoch``: a JetStream stream's creation time, a Kafka topic's id),
-- and a bus reset (the partition re-created below the position) with what the source's policy
-- made of it: followed (the position moved to the new incarnation's start) or stopped at (the
-- partition held, ``halted``, until an operator restarts it: ``source_restart.lua``). The
-- position is compared first, as a commit's is, so a consumer that lost its partition moves
-- nothing.
-- KEYS: the target's sources (hash: source name -> JSON).
-- ARGV: source name, source id, partition, the position expected, the new position ('' to
-- leave it), the entries of the partition before it ('' to leave it; what its lag counts
-- from), the epoch ('' to leave it), a reset event (JSON, '' for none), '1' to stop the
-- partition at the reset (else its position moves), the most reset events kept.
-- Replies: {'GONE'} (no such source here); {'MOVED', position}; {'OK', the source's progress
-- as now recorded (JSON)}.
-- uses: table_field
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return {'GONE'}
end
local record = cjson.decode(raw)
if record['id'] ~= ARGV[2] then
  return {'GONE'}
end
local partition = ARGV[3]
local positions = record['positions']
local current = positions[partition] or ''
if current ~= ARGV[4] then
  return {'MOVED', current}
end
if ARGV[8] ~= '' then
  local event = cjson.decode(ARGV[8])
  local kept = {event}
  for _, older in ipairs(table_field(record, 'resets')) do
    if #kept >= tonumber(ARGV[10]) then
      break
    end
    kept[#kept + 1] = older
  end
  record['resets'] = kept
  record['reset_count'] = (record['reset_count'] or 0) + 1
  if ARGV[9] == '1' then
    table_field(record, 'halted')[partition] = event
  end
end
if ARGV[9] ~= '1' then
  if ARGV[5] ~= '' then
    positions[partition] = ARGV[5]
    table_field(record, 'starts')[partition] = nil
  end
  if ARGV[6] ~= '' then
    table_field(record, 'before')[partition] = tonumber(ARGV[6])
  end
  if ARGV[7] ~= '' then
    table_field(record, 'epochs')[partition] = ARGV[7]
  end
end
record['positions'] = positions
local encoded = cjson.encode(record)
redis.call('HSET', KEYS[1], ARGV[1], encoded)
return {'OK', encoded}
