-- KEYS: a stream's head, log.  ARGV: the stream incarnation the reader attached to, after
-- (stream id), count, through (the last id it may take: its cut, or '+'), then the ids of
-- entries whose chunks the reader holds already (their payloads are left out: '').
-- An attached selector's read of its next entries: {'OK', entries}, or 'GONE' when the stream
-- is deleted or is another incarnation of the name (it never feeds a selector of an earlier
-- one). Counting attempts and checking the lease is the selector's own TAKE_ATTEMPT, in its
-- slot.
-- uses: without_held_payloads
if redis.call('HGET', KEYS[1], 'incarnation') ~= ARGV[1] then
  return {'GONE'}
end
local entries = redis.call('XRANGE', KEYS[2], '(' .. ARGV[2], ARGV[4], 'COUNT', ARGV[3])
return {'OK', without_held_payloads(entries, 5)}
