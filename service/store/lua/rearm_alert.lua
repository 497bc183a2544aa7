-- KEYS: head, alerts, alert_states.  ARGV: the alert's id.
-- Re-arms an alert: its judgement of the last version says "not firing", so the next version
-- over its threshold is a crossing again, with a new event. For an alert left firing by an
-- event that was never delivered, or one whose receiver missed it.
-- Replies 'NOTFOUND' (no selector), 'GONE' (no such alert) or 'OK'.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'NOTFOUND'
end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return 'GONE'
end
local raw = redis.call('HGET', KEYS[3], ARGV[1])
if raw then
  local state = cjson.decode(raw)
  redis.call('HSET', KEYS[3], ARGV[1], '{"version":' .. string.format('%.0f', state.version) ..
             ',"firing":false,"crossings":' .. string.format('%.0f', state.crossings) .. '}')
end
return 'OK'
