-- response() over a login and an unauthorised call in turn: it counts
-- the responses whose status, header and body are the server's, and
-- done prints the counts summed over the threads.
local i = 0
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  login, denied, other = 0, 0, 0
end

function request()
  i = i + 1
  if i % 2 == 1 then
    return wrk.format("GET", "/login")
  end
  return wrk.format("GET", "/api/items")
end

function response(status, headers, body)
  if status == 200 and headers["X-Token"] == "tok-42" and body == "welcome\n" then
    login = login + 1
  elseif status == 401 and body == "items\n" and headers["X-Token"] == nil then
    denied = denied + 1
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local l, d, o = 0, 0, 0
  for _, t in ipairs(threads) do
    l, d, o = l + t:get("login"), d + t:get("denied"), o + t:get("other")
  end
  print(string.format("response login %d denied %d other %d of %d", l, d, o, summary.requests))
end
