local function now_str()
  local t = redis.call('TIME')
  return t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
end
