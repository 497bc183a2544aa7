-- KEYS: head, alerts.  ARGV: the alert's id, its JSON with the new secret (the old one kept
-- as its previous secret), the secret the caller read.
-- A compare-and-set on the secret: the alert is replaced only if its secret is still the one
-- the caller rotated (two rotations at once: one wins, the other is told to read again).
-- Replies 'OK', 'NOTFOUND' (no such selector), 'GONE' (no such alert) or 'CHANGED'.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'NOTFOUND'
end
local current = redis.call('HGET', KEYS[2], ARGV[1])
if not current then
  return 'GONE'
end
local ok, parsed = pcall(cjson.decode, current)
if not ok or type(parsed) ~= 'table' or parsed.secret ~= ARGV[3] then
  return 'CHANGED'
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 'OK'
