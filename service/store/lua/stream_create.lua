-- KEYS: meta, head, names of a stream.  ARGV: meta json, names json or '', incarnation.
-- Creates the stream with an empty log, unless the name is taken ('CONFLICT').
-- uses: now
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then
  return {'CONFLICT'}
end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[3], ARGV[2])
end
local now = now_str()
redis.call('HSET', KEYS[2], 'incarnation', ARGV[3], 'appended', '0', 'entries', '0',
           'last_id', '0-0', 'trimmed', '0-0', 'created_at', now)
return {'OK', now}
