-- KEYS: head, alert_deliveries.  ARGV: the incarnation the event was raised for, the event's
-- id, its delivery status (JSON).
-- Only while the event is still kept, for the selector it was raised for (a delivery outliving
-- its selector's deletion writes nothing). Replies 1 if written, 0 if not.
local incarnation = redis.call('HGET', KEYS[1], 'incarnation') or ''
if incarnation ~= ARGV[1] or redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
