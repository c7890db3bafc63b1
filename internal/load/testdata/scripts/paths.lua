-- Several paths in turn, the third a POST with a body, and a header set
-- in wrk.headers by init from the script's argument.
local paths = { "/a", "/b", "/c" }
local i = 0

function init(args)
  wrk.headers["X-Run"] = args[1] or "none"
end

function request()
  i = i + 1
  local path = paths[(i - 1) % #paths + 1]
  if path == "/c" then
    return wrk.format("POST", path, nil, "body of c")
  end
  return wrk.format("GET", path)
end
