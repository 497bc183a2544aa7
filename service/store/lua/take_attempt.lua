-- KEYS: an attached selector's head, attempts, lease.
-- ARGV: the stream it reads, lease holder, how many holders follow, the holders whose last
-- attempts are taken back, then the id of the first entry read (none when nothing was read).
-- What TAKE does besides reading, for a selector that read its entries from its stream
-- (STREAM_READ, another slot): only the lease holder goes on, and its attempt on the first
-- entry is counted before any computing. 'DETACHED' when the selector no longer reads that
-- stream (DETACH ran since the drain began): the drain stops and reads the description anew.
-- uses: forgive
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOTFOUND'}
end
if redis.call('HGET', KEYS[1], 'stream') ~= ARGV[1] then
  return {'DETACHED'}
end
if redis.call('GET', KEYS[3]) ~= ARGV[2] then
  return {'LEASE'}
end
local holders = tonumber(ARGV[3])
forgive(KEYS[2], 4, 3 + holders)
local first = ARGV[4 + holders]
if not first then
  return {'OK', 0}
end
local attempts = redis.call('HINCRBY', KEYS[2], first, 1)
redis.call('HSET', KEYS[2], 'by:' .. ARGV[2], first)
return {'OK', attempts}
