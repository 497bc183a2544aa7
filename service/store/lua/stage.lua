-- KEYS: staging.  ARGV: ttl ms, then field, value pairs.
-- What a ``create`` stages for readers of its first version, whole and with its TTL at once
-- (a script, not MULTI: redis-py's cluster client cannot run transactions on the service's
-- event loop).
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
