-- Unlink every key that set ``set`` lists but ``keep``, and take it out of the set: the blobs
-- of the versions a commit replaced, the checkpoints a newer checkpoint replaced.
local function keep_only(set, keep)
  for _, k in ipairs(redis.call('SMEMBERS', set)) do
    if k ~= keep then
      redis.call('UNLINK', k)
      redis.call('SREM', set, k)
    end
  end
end
