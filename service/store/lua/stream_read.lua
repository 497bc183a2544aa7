-- KEYS: a stream's head, log.  ARGV: the stream incarnation the reader attached to, after
-- (stream id), count, then the ids of entries whose chunks the reader holds already (their
-- payloads are left out: '').
-- An attached selector's read of its next entries: {'OK', entries}, or 'GONE' when the stream
-- is deleted or is another incarnation of the name (it never feeds a selector of an earlier
-- one). Counting attempts and checking the lease is the selector's own TAKE_ATTEMPT, in its
-- slot.
if redis.call('HGET', KEYS[1], 'incarnation') ~= ARGV[1] then
  return {'GONE'}
end
local entries = redis.call('XRANGE', KEYS[2], '(' .. ARGV[2], '+', 'COUNT', ARGV[3])
if #ARGV > 3 and #entries > 0 then
  local held = {}
  for i = 4, #ARGV do
    held[ARGV[i]] = true
  end
  for _, entry in ipairs(entries) do
    if held[entry[1]] then
      local fields = entry[2]
      for i = 1, #fields, 2 do
        if fields[i] == 'payload' then
          fields[i + 1] = ''
        end
      end
    end
  end
end
return {'OK', entries}
