-- without_held_payloads(entries, first): XRANGE entries with the payload of every entry whose
-- id is in ARGV[first..] replaced by '' (the reader holds those chunks already: they were
-- handed over by the process that appended them).
local function without_held_payloads(entries, first)
  if #ARGV < first or #entries == 0 then
    return entries
  end
  local held = {}
  for i = first, #ARGV do
    held[ARGV[i]] = true
  end
  for _, entry in ipairs(entries) do
    if held[entry[1]] then
      local fields = entry[2]
      for i = 1, #fields, 2 do
        if fields[i] == 'payload' then
          fields[i + 1] = ''
        end
      end
    end
  end
  return entries
end
