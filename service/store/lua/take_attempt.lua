-- KEYS: an attached selector's head, attempts, lease.
-- ARGV: the stream it reads, the cut its lease knows ('' for none), lease holder, how many
-- holders follow, the holders whose last attempts are taken back, then the id of the first
-- entry read (none when nothing was read).
-- What TAKE does besides reading, for a selector that read its entries from its stream
-- (STREAM_READ, another slot): only the lease holder goes on, and its attempt on the first
-- entry is counted before any computing. 'DETACHED' when the selector no longer reads that
-- stream (DETACH ran since the drain began), 'CUT' when a detach cut the stream since the
-- lease was taken: the drain stops (and the next lease reads the cut).
-- uses: forgive
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOTFOUND'}
end
local head = redis.call('HMGET', KEYS[1], 'stream', 'stream_cut')
if head[1] ~= ARGV[1] then
  return {'DETACHED'}
end
if (head[2] or '') ~= ARGV[2] then
  return {'CUT'}
end
if redis.call('GET', KEYS[3]) ~= ARGV[3] then
  return {'LEASE'}
end
local holders = tonumber(ARGV[4])
forgive(KEYS[2], 5, 4 + holders)
local first = ARGV[5 + holders]
if not first then
  return {'OK', 0}
end
local attempts = redis.call('HINCRBY', KEYS[2], first, 1)
redis.call('HSET', KEYS[2], 'by:' .. ARGV[3], first)
return {'OK', attempts}
