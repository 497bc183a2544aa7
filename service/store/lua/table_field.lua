-- A record's field that holds a table (a JSON object decoded by cjson): the table, made
-- empty where the field is absent or holds something else.
local function table_field(record, name)
  local value = record[name]
  if type(value) ~= 'table' then
    value = {}
    record[name] = value
  end
  return value
end
