-- What a script may not do: every one of these is nil.
function init(args)
  local names = {}
  for _, name in ipairs({ "dofile", "loadfile", "require", "module" }) do
    if _G[name] ~= nil then names[#names + 1] = name end
  end
  if os.execute ~= nil or os.remove ~= nil or os.exit ~= nil then names[#names + 1] = "os" end
  if io.open ~= nil or io.read ~= nil or io.popen ~= nil then names[#names + 1] = "io" end
  io.write("sandbox ", #names == 0 and "closed" or table.concat(names, ","), "\n")
end
