-- What a source (``service/sources``) read from its bus, committed with its position in one
-- step: the good rows as one entry of the target's log (a selector's, or a stream's: the same
-- layout, ``append_entry``), the rejected entries with their positions and reasons, and the
-- partition's new position. The position is compared and set here, so a consumer that died
-- after the append and a second consumer that read the same entries can never append them
-- again: exactly once from the bus to the log.
-- KEYS: head, log, idems, name->index, index->name, the target's sources (hash: source name ->
-- JSON), its source rejections (list, newest first), a stream's attachments (for a selector,
-- its sources key again: a key of the slot), [the pending set].
-- ARGV: source name, source id, partition, the position expected, the new position, the
-- entries of the partition before its start ('' to leave it; what its lag counts from), entries
-- consumed, rows, the most rejections kept, the number of rejections n, n rejections (JSON),
-- then, when rows > 0: the payload, the incarnation of the target the rows were checked against,
-- the mark ('' no pending mark; the target's name for a selector; '*' for a stream: every
-- attached selector).
-- Replies: {'GONE'} (no such source here: deleted, or the target deleted with it);
-- {'MOVED', position} (another consumer committed since: read again from there); what
-- ``append`` refuses with ({'NOTFOUND'}, {'INCARNATION'}, {'ATTACHED', stream}); a stream
-- being deleted: {'CLOSING'}; else {'OK', log id or '', attachments (stream, flat), the
-- source's progress as now recorded (JSON)}.
-- uses: int, now_ms, append_entry
local raw = redis.call('HGET', KEYS[6], ARGV[1])
if not raw then
  return {'GONE'}
end
local record = cjson.decode(raw)
if record['id'] ~= ARGV[2] then
  return {'GONE'}
end
local positions = record['positions']
local current = positions[ARGV[3]] or ''
if current ~= ARGV[4] then
  return {'MOVED', current}
end
local rows = tonumber(ARGV[8])
local n_rejected = tonumber(ARGV[10])
local log_id = ''
local attached = {}
if rows > 0 then
  local at = 11 + n_rejected
  local mark = ARGV[at + 2]
  if mark == '*' and redis.call('HEXISTS', KEYS[1], 'closing') == 1 then
    return {'CLOSING'}
  end
  local reply = append({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]},
                       {ARGV[at], ARGV[8], '', '', '0', '0', '0', ARGV[at + 1]})
  if reply[1] ~= 'NEW' then
    return reply
  end
  log_id = reply[2]
  if mark == '*' then
    attached = redis.call('HGETALL', KEYS[8])
    if KEYS[9] then
      local now = now_ms()
      for i = 1, #attached, 2 do
        redis.call('ZADD', KEYS[9], now, attached[i])
      end
    end
  elseif mark ~= '' and KEYS[9] then
    redis.call('ZADD', KEYS[9], now_ms(), mark)
  end
end
local now = now_ms()
for i = 1, n_rejected do
  redis.call('LPUSH', KEYS[7], ARGV[10 + i])
end
if n_rejected > 0 then
  redis.call('LTRIM', KEYS[7], 0, tonumber(ARGV[9]) - 1)
end
positions[ARGV[3]] = ARGV[5]
record['positions'] = positions
if ARGV[6] ~= '' then
  local before = record['before'] or {}
  before[ARGV[3]] = tonumber(ARGV[6])
  record['before'] = before
end
record['entries'] = (record['entries'] or 0) + tonumber(ARGV[7])
record['rows'] = (record['rows'] or 0) + rows
record['rejected'] = (record['rejected'] or 0) + n_rejected
record['updated_at'] = now / 1000
local encoded = cjson.encode(record)
redis.call('HSET', KEYS[6], ARGV[1], encoded)
return {'OK', log_id, attached, encoded}
