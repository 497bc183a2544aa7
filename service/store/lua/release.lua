-- KEYS: a stream's attachments, log, head, detaching.
-- ARGV: selector, its incarnation, the cursor of its last checkpoint, or '' to detach it
-- (a selector deleted or detached: it holds nothing back any more).
-- Moves the selector's released cursor forward (never back; only for the incarnation that
-- attached), whether it is attached or being detached (STREAM_CUT), then trims the log
-- through the lowest released cursor of every attachment and detaching selector: none ever
-- needs an entry at or before its own checkpoint's cursor. A stream without either trims
-- nothing. Answers {'OK', the id the log is trimmed through}.
-- uses: int, stream_ids
for _, held in ipairs({KEYS[1], KEYS[4]}) do
  local value = redis.call('HGET', held, ARGV[1])
  if value then
    local incarnation, start, released, rest = string.match(value, '^(%S+) (%S+) (%S+) (.+)$')
    if incarnation == ARGV[2] then
      if ARGV[3] == '' then
        redis.call('HDEL', held, ARGV[1])
      elseif cmp_id(ARGV[3], released) > 0 then
        redis.call('HSET', held, ARGV[1],
                   incarnation .. ' ' .. start .. ' ' .. ARGV[3] .. ' ' .. rest)
      end
    end
  end
end
local trimmed = redis.call('HGET', KEYS[3], 'trimmed')
if not trimmed then
  return {'NOTFOUND'}
end
local lowest = nil
for _, held in ipairs({KEYS[1], KEYS[4]}) do
  for _, v in ipairs(redis.call('HVALS', held)) do
    local released = string.match(v, '^%S+ %S+ (%S+) ')
    if lowest == nil or cmp_id(released, lowest) < 0 then
      lowest = released
    end
  end
end
if lowest ~= nil and cmp_id(lowest, trimmed) > 0 then
  local ms, seq = string.match(lowest, '^(%d+)-(%d+)$')
  redis.call('XTRIM', KEYS[2], 'MINID', ms .. '-' .. int_str(tonumber(seq) + 1))
  redis.call('HSET', KEYS[3], 'trimmed', lowest)
  trimmed = lowest
end
return {'OK', trimmed}
