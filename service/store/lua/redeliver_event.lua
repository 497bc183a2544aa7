-- KEYS: head, alert_events, outbox, outbox_events, alert_deliveries.  ARGV: the event's id,
-- its delivery status (JSON) from now on.
-- uses: int, now_ms
-- Puts a kept event back in the outbox, due now, its attempts counted afresh: what an operator
-- does for an event that failed (its receiver was down for every attempt).
-- Replies 'NOTFOUND' (no selector), 'GONE' (no such event kept), 'QUEUED' (it is in the outbox
-- already: nothing changed) or 'OK'.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'NOTFOUND'
end
local id = ARGV[1]
if redis.call('ZSCORE', KEYS[3], id) then
  return 'QUEUED'
end
for _, raw in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  local ok, event = pcall(cjson.decode, raw)
  if ok and type(event) == 'table' and event.id == id then
    redis.call('HSET', KEYS[4], id, raw)
    redis.call('HDEL', KEYS[4], id .. '#attempts')
    redis.call('ZADD', KEYS[3], int_str(now_ms()), id)
    redis.call('HSET', KEYS[5], id, ARGV[2])
    return 'OK'
  end
end
return 'GONE'
