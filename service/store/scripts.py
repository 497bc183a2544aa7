"""The Lua scripts of the store: every multi-key step that must be atomic.

All keys a script touches belong to one selector and share its hash tag, so each script runs in a
single slot on Redis Cluster. Keys reached through a set (state blobs, idempotency records) are
not declared in KEYS; they carry the same hash tag, which Redis Cluster tolerates in practice.
Replies are arrays whose first element is a status word; ``redis.call('TIME')`` is used as the
clock so every replica of the service agrees on ``updated_at`` (Redis 7 replicates effects).
"""

from __future__ import annotations

_NOW = """
local function now_str()
  local t = redis.call('TIME')
  return t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
end
"""

#: KEYS: meta, head, names, staging, state0, blobs.  ARGV: meta json, names json or ''.
CREATE = (
    _NOW
    + """
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('DEL', KEYS[4])
  return {'CONFLICT'}
end
if redis.call('EXISTS', KEYS[4]) == 0 then
  return {'STAGING_LOST'}
end
redis.call('RENAME', KEYS[4], KEYS[5])
redis.call('PERSIST', KEYS[5])
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[3], ARGV[2])
else
  redis.call('DEL', KEYS[3])
end
local now = now_str()
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'version', '0', 'cursor', '0-0', 'rows_seen', '0',
           'appended', '0', 'state_key', KEYS[5], 'updated_at', now)
redis.call('SADD', KEYS[6], KEYS[5])
return {'OK', now}
"""
)

#: KEYS: meta, head, names, log, lease, fence, blobs, idems, name->index, index->name,
#: segments.  Returns 1 if the selector existed.
DELETE = """
local existed = redis.call('EXISTS', KEYS[1]) + redis.call('EXISTS', KEYS[2])
for _, k in ipairs(redis.call('SMEMBERS', KEYS[7])) do
  redis.call('UNLINK', k)
end
for _, k in ipairs(redis.call('SMEMBERS', KEYS[11])) do
  redis.call('UNLINK', k)
end
for _, k in ipairs(redis.call('ZRANGE', KEYS[8], 0, -1)) do
  redis.call('UNLINK', k)
end
redis.call('UNLINK', unpack(KEYS))
if existed > 0 then return 1 end
return 0
"""

#: KEYS: head, log, idems, name->index, index->name[, idem].
#: ARGV: payload, rows, digest, idem key or '', ttl ms, then one name per item (or none).
#: The head's ``appended`` counter numbers the items (rows or feature columns) in log order, so
#: an entry knows the stream position of its first item before it is applied. Names are checked
#: and registered here, atomically with the append: no two features ever share a name, and
#: ``f<i>`` (the name shown for an unnamed feature ``i``) may only name feature ``i``.
APPEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOTFOUND'}
end
if #KEYS >= 6 then
  local rec = redis.call('HMGET', KEYS[6], 'digest', 'log_id', 'applied_version', 'rows_seen',
                         'first')
  if rec[1] then
    if rec[1] ~= ARGV[3] then
      return {'MISMATCH'}
    end
    return {'DUP', rec[2], rec[3], rec[4], rec[5]}
  end
end
local first = tonumber(redis.call('HGET', KEYS[1], 'appended') or '0')
for i = 6, #ARGV do
  local index = first + i - 6
  local owner = redis.call('HGET', KEYS[4], ARGV[i])
  if owner then
    return {'NAME_TAKEN', ARGV[i], owner}
  end
  local number = string.match(ARGV[i], '^f(%d+)$')
  if number and tonumber(number) ~= index then
    return {'NAME_RESERVED', ARGV[i], string.format('%d', index)}
  end
end
for i = 6, #ARGV do
  local index = string.format('%d', first + i - 6)
  redis.call('HSET', KEYS[4], ARGV[i], index)
  redis.call('HSET', KEYS[5], index, ARGV[i])
end
redis.call('HINCRBY', KEYS[1], 'appended', ARGV[2])
local first_str = string.format('%d', first)
if #KEYS < 6 then
  local id = redis.call('XADD', KEYS[2], '*', 'payload', ARGV[1], 'rows', ARGV[2],
                        'first', first_str)
  return {'NEW', id, first_str}
end
local id = redis.call('XADD', KEYS[2], '*', 'payload', ARGV[1], 'rows', ARGV[2],
                      'first', first_str, 'idem', ARGV[4])
redis.call('HSET', KEYS[6], 'digest', ARGV[3], 'log_id', id, 'first', first_str)
redis.call('PEXPIRE', KEYS[6], ARGV[5])
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%.0f', now_ms))
redis.call('ZADD', KEYS[3], string.format('%.0f', now_ms + tonumber(ARGV[5])), KEYS[6])
return {'NEW', id, first_str}
"""

#: KEYS: head, lease, fence.  ARGV: holder, ttl ms.
ACQUIRE_LEASE = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOTFOUND'}
end
if not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {'BUSY'}
end
return {'OK', redis.call('INCR', KEYS[3])}
"""

#: KEYS: lease, fence.  ARGV: holder, token, ttl ms.
RENEW_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
"""

#: KEYS: lease.  ARGV: holder.
RELEASE_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

#: KEYS: head, lease, fence, blobs, log, new state, idem keys...
#: ARGV: holder, token, expected version, cursor, rows_seen, trim min id, writer field.
COMMIT = (
    _NOW
    + """
local function cmp_num(x, y)
  if #x ~= #y then
    if #x < #y then return -1 end
    return 1
  end
  if x == y then return 0 end
  if x < y then return -1 end
  return 1
end
local function cmp_id(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  local c = cmp_num(am, bm)
  if c ~= 0 then return c end
  return cmp_num(as, bs)
end
local writer_field = ARGV[7]
local function drop_blob()
  -- Only a blob this applier wrote, and never the one the head points at.
  if redis.call('HGET', KEYS[6], writer_field) == ARGV[1]
     and redis.call('HGET', KEYS[1], 'state_key') ~= KEYS[6] then
    redis.call('UNLINK', KEYS[6])
    redis.call('SREM', KEYS[4], KEYS[6])
  end
end

local head = redis.call('HMGET', KEYS[1], 'version', 'cursor')
if not head[1] then
  drop_blob()
  return {'NOTFOUND'}
end
local holder = redis.call('GET', KEYS[2])
if holder ~= ARGV[1] then
  drop_blob()
  return {'LEASE', holder or ''}
end
local fence = redis.call('GET', KEYS[3])
if fence ~= ARGV[2] then
  drop_blob()
  return {'FENCED', fence or ''}
end
if head[1] ~= ARGV[3] then
  drop_blob()
  return {'VERSION', head[1]}
end
if redis.call('HGET', KEYS[6], writer_field) ~= ARGV[1] then
  return {'BLOB'}
end
if cmp_id(ARGV[4], head[2]) < 0 then
  drop_blob()
  return {'CURSOR', head[2]}
end

local version = tostring(tonumber(head[1]) + 1)
local now = now_str()
redis.call('HSET', KEYS[1], 'version', version, 'cursor', ARGV[4], 'rows_seen', ARGV[5],
           'state_key', KEYS[6], 'updated_at', now)
for i = 7, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('HSET', KEYS[i], 'applied_version', version, 'rows_seen', ARGV[5])
  end
end
for _, k in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  if k ~= KEYS[6] then
    redis.call('UNLINK', k)
    redis.call('SREM', KEYS[4], k)
  end
end
redis.call('XTRIM', KEYS[5], 'MINID', ARGV[6])
return {'OK', version, now}
"""
)

#: KEYS: head.  ARGV: state fields to read.
READ_FIELDS = """
local h = redis.call('HMGET', KEYS[1], 'version', 'cursor', 'rows_seen', 'state_key', 'updated_at')
if not h[1] then
  return {'NOTFOUND'}
end
local out = {'OK', h[1], h[2], h[3], h[4], h[5]}
if #ARGV > 0 then
  if redis.call('EXISTS', h[4]) == 0 then
    return {'NOSTATE', h[4]}
  end
  local vals = redis.call('HMGET', h[4], unpack(ARGV))
  for i = 1, #ARGV do
    out[6 + i] = vals[i]
  end
end
return out
"""

ALL: dict[str, str] = {
    "create": CREATE,
    "delete": DELETE,
    "append": APPEND,
    "acquire_lease": ACQUIRE_LEASE,
    "renew_lease": RENEW_LEASE,
    "release_lease": RELEASE_LEASE,
    "commit": COMMIT,
    "read_fields": READ_FIELDS,
}
