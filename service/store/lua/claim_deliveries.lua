-- KEYS: head, outbox, outbox_events.  ARGV: the lease (ms), the most events to claim.
-- uses: int, now_ms
-- Claims the selector's events due for an attempt (the outbox scores each by when it is due):
-- each one's score becomes now + the lease, so that no other process attempts it while this
-- one does, and a process that dies mid-attempt leaves it due again once the lease ends (at
-- least once). Counts the attempt with the event (a crash is an attempt too).
-- Replies {'GONE'} for a selector that no longer exists, else {next, id, event, attempts, ...}
-- where next is the earliest score left in the outbox ('' when it is empty).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'GONE'}
end
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', int_str(now), 'LIMIT', 0,
                       tonumber(ARGV[2]))
local out = {''}
for _, id in ipairs(due) do
  local event = redis.call('HGET', KEYS[3], id)
  if event then
    redis.call('ZADD', KEYS[2], int_str(now + tonumber(ARGV[1])), id)
    local attempts = redis.call('HINCRBY', KEYS[3], id .. '#attempts', 1)
    table.insert(out, id)
    table.insert(out, event)
    table.insert(out, attempts)
  else
    redis.call('ZREM', KEYS[2], id)
  end
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then
  out[1] = first[2]
end
return out
