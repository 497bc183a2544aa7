-- KEYS: head, outbox, outbox_events, alert_deliveries.  ARGV: the event's id, its delivery
-- status (JSON), when it is due again (ms), or '' when it is done with (delivered, given up).
-- Records how an attempt went, and either takes the event out of the outbox or sets when it
-- is tried next. The status is written only while the event is kept (a delivery outliving its
-- selector, or its event's trimming, writes nothing).
-- Replies the earliest score left in the outbox, or '' when it is empty (or the selector gone).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return ''
end
local id = ARGV[1]
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id, id .. '#attempts')
elseif redis.call('ZSCORE', KEYS[2], id) then
  redis.call('ZADD', KEYS[2], ARGV[3], id)
end
if redis.call('HEXISTS', KEYS[4], id) == 1 then
  redis.call('HSET', KEYS[4], id, ARGV[2])
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return first[2] or ''
