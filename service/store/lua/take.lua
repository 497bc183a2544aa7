-- KEYS: head, log, attempts, lease.  ARGV: after (stream id), count, lease holder, whether to
-- count the attempt ('1' or '0'), how many holders follow, the holders whose last attempts are
-- taken back (``FORGIVE_ATTEMPTS``), then the ids of entries whose chunks the caller holds
-- already (handed over by the process that appended them): their payloads are left out of the
-- reply ('' instead).
-- The applier's read of its next batch: up to ``count`` entries after ``after``, and how many
-- times an applier has now started on the first of them (counted here, before computing, so
-- that a chunk which kills the applying process is still counted; every commit clears them).
-- Not counting writes nothing (no fsync of its own): an applier that woke for entries appended
-- while it lingered takes them so; were one of them to kill it, the next taker counts it.
-- Only the lease holder reads: an applier that lost its lease (or whose selector was deleted,
-- and perhaps created again) learns it here instead of computing for nothing.
-- uses: forgive, without_held_payloads
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOTFOUND'}
end
if redis.call('GET', KEYS[4]) ~= ARGV[3] then
  return {'LEASE'}
end
local holders = tonumber(ARGV[5])
forgive(KEYS[3], 6, 5 + holders)
local entries = redis.call('XRANGE', KEYS[2], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
if #entries == 0 then
  return {'OK', 0, entries}
end
without_held_payloads(entries, 6 + holders)
if ARGV[4] ~= '1' then
  return {'OK', tonumber(redis.call('HGET', KEYS[3], entries[1][1]) or '0') + 1, entries}
end
local attempts = redis.call('HINCRBY', KEYS[3], entries[1][1], 1)
redis.call('HSET', KEYS[3], 'by:' .. ARGV[3], entries[1][1])
return {'OK', attempts, entries}
