-- KEYS: a stream's head, log, attachments.
-- ARGV: selector, its incarnation, 'start' or 'now', the stream incarnation expected ('' for
-- any).
-- Records the selector as attached, starting after the id the log was trimmed through
-- ('start': every entry the stream still holds) or after its newest entry ('now'), and
-- answers where that is: {'OK', cursor, items before it, entries before it, the stream's
-- incarnation}. From here on no RELEASE trims past that cursor (both run in this slot), so the
-- selector, created next with its head at the cursor, finds every entry it must apply.
-- 'TAKEN' (and the attachment) when the selector's name is attached already; 'CLOSING' while
-- the stream is being deleted.
-- uses: int, now_ms
local head = redis.call('HMGET', KEYS[1], 'incarnation', 'last_id', 'trimmed', 'appended',
                        'entries', 'closing')
if not head[1] then
  return {'NOTFOUND'}
end
if ARGV[4] ~= '' and head[1] ~= ARGV[4] then
  return {'NOTFOUND'}
end
if head[6] then
  return {'CLOSING'}
end
local existing = redis.call('HGET', KEYS[3], ARGV[1])
if existing then
  return {'TAKEN', existing}
end
local cursor, items, entries
if ARGV[3] == 'now' then
  cursor, items, entries = head[2], tonumber(head[4]), tonumber(head[5])
else
  cursor = head[3]
  entries = tonumber(head[5]) - redis.call('XLEN', KEYS[2])
  local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
  items = tonumber(head[4])
  if #first > 0 then
    local fields = first[1][2]
    for i = 1, #fields, 2 do
      if fields[i] == 'first' then items = tonumber(fields[i + 1]) end
    end
  end
end
redis.call('HSET', KEYS[3], ARGV[1],
           ARGV[2] .. ' ' .. cursor .. ' ' .. cursor .. ' ' .. int_str(now_ms()))
return {'OK', cursor, int_str(items), int_str(entries), head[1]}
