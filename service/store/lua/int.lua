-- Lua prints numbers with "%.14g": 10^14 would become "1e+14". Integers go out through this.
local function int_str(n)
  return string.format('%.0f', n)
end
