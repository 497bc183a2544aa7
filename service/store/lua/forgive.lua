-- KEYS: attempts.  ARGV: lease holders.
-- Take back the last attempt of each holder: it made no progress, but its process is alive and
-- knows that the entry was not why (Redis was away or slow, the lease was lost, the process is
-- shutting down). Only attempts nobody takes back count against an entry (see ``TAKE``).
local function forgive(attempts, first_holder, last_holder)
  for i = first_holder, last_holder do
    local by = 'by:' .. ARGV[i]
    local entry = redis.call('HGET', attempts, by)
    if entry then
      if tonumber(redis.call('HGET', attempts, entry) or '0') > 0 then
        redis.call('HINCRBY', attempts, entry, -1)
      end
      redis.call('HDEL', attempts, by)
    end
  end
end
