-- KEYS: head, alerts, alert_states, alert_events, alert_deliveries, outbox, outbox_events.
-- ARGV: alert id, incarnation, version, '1' if the version is over the alert's threshold (else
-- '0'), the event JSON without its closing brace, events kept, the event's first delivery
-- status (JSON), '1' if the alert is told when it resolves (an Alertmanager's: the first
-- version judged below the threshold after a crossing raises a resolving event, its id the
-- crossing's and '-resolved').
-- Judges one version for one alert, once, whichever replica asks first: a version at or before
-- the last one judged is ignored, so two replicas (or an applier and the one that took over)
-- never raise one crossing twice. A crossing is a version over the threshold judged after one
-- that was not (or the first one judged): it is counted, its event recorded (its id: the
-- alert's id, '-', the crossing's number), and the reply is {crossing, event JSON}: the caller
-- delivers it. Anything else replies {} (also for an alert deleted meanwhile, or a selector
-- deleted or created anew since the version was committed). The event goes into the outbox,
-- due now, in the same script: once claimed, it is delivered whoever dies (at least once).
-- uses: int, now_ms
local incarnation = redis.call('HGET', KEYS[1], 'incarnation') or ''
if incarnation ~= ARGV[2] or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return {}
end
local last, firing, crossings = -1, false, 0
local raw = redis.call('HGET', KEYS[3], ARGV[1])
if raw then
  local state = cjson.decode(raw)
  last, firing, crossings = tonumber(state.version), state.firing, tonumber(state.crossings)
end
if tonumber(ARGV[3]) <= last then
  return {}
end
local over = ARGV[4] == '1'
local fire = over and not firing
local resolve = firing and not over and ARGV[8] == '1'
if fire then
  crossings = crossings + 1
end
local crossing = string.format('%d', crossings)
redis.call('HSET', KEYS[3], ARGV[1], '{"version":' .. ARGV[3] .. ',"firing":' ..
           tostring(over) .. ',"crossings":' .. crossing .. '}')
if not (fire or resolve) then
  return {}
end
local id = ARGV[1] .. '-' .. crossing
local event = ARGV[5] .. ',"id":"' .. id .. '","crossing":' .. crossing .. '}'
if resolve then
  id = id .. '-resolved'
  event = ARGV[5] .. ',"id":"' .. id .. '","crossing":' .. crossing .. ',"resolved":true}'
end
redis.call('LPUSH', KEYS[4], event)
local kept = tonumber(ARGV[6])
for _, old in ipairs(redis.call('LRANGE', KEYS[4], kept, -1)) do
  local ok, parsed = pcall(cjson.decode, old)
  if ok and type(parsed) == 'table' and parsed.id then
    redis.call('HDEL', KEYS[5], parsed.id)
  end
end
redis.call('LTRIM', KEYS[4], 0, kept - 1)
redis.call('HSET', KEYS[5], id, ARGV[7])
redis.call('HSET', KEYS[7], id, event)
redis.call('ZADD', KEYS[6], int_str(now_ms()), id)
return {crossings, event}
