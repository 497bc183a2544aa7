-- Appends one or more entries to a selector's log, one after the other, exactly as that many
-- calls would (``group_commit``), and answers a reply per entry (``append_entry``: a selector
-- attached to a stream refuses, 'ATTACHED').
-- KEYS: head, log, idems, name->index, index->name[, the pending set], then each entry's
-- [idem record, the record's key of an earlier release].
-- ARGV: the number of entries, the selector's name when the pending set is given (it marks
-- the selector there, scored by the time, when an entry was appended; '' otherwise: in a
-- cluster the set is in another slot, and the caller marks it), then per entry: its number of
-- record keys (0 or 2), its number of names, payload, items, digest, idem id or '', ttl ms,
-- most idem records, merge flag ('1' or '0'), the incarnation the chunk was checked against
-- ('' for any), then one name per item (or none). A chunk checked against another incarnation
-- (the name deleted and created again since the writer described it) is refused:
-- 'INCARNATION'.
-- The head's ``appended`` counter numbers the items (rows or feature columns) in log order, so
-- an entry knows the stream position of its first item before it is applied. Names are checked
-- and registered here, atomically with the append: no two features ever share a name, and
-- ``f<i>`` (the name shown for an unnamed feature ``i``) may only name feature ``i``.
-- A log id is ``<ms>-<k * 2^32 + tag>`` (``keys.log_id_tag``): the Redis clock in ms (never
-- behind the previous id), ``k`` the entries before it in that ms, and a tag of the
-- selector's incarnation, so that a log id of another selector, or of an earlier selector of
-- the same name, is known not to be this one's. (A head of an earlier release has no
-- incarnation: its ids stay Redis's own.)
-- A record holds the first 32 hex digits of the body's digest (an earlier release's, all 64;
-- either is compared as a prefix). Records expire after their TTL, and beyond ``most idem
-- records`` per selector the oldest are dropped at once: their memory is bounded either way. A
-- repeated key whose entry was rejected answers its reason. A repeated key rewrites its record's
-- digest (the same value): a write, so that a WAIT after it (SIFT_REDIS_WAIT_REPLICAS) covers
-- the first append too.
-- uses: int, now_ms, append_entry, append_batch
local key_at = 6
if ARGV[2] ~= '' then
  key_at = 7
end
local replies, appended = append_batch(key_at, 3)
if appended and ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[6], now_ms(), ARGV[2])
end
return replies
