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
