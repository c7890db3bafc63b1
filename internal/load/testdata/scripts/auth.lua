-- An auth token from a first response: until response() has seen the
-- token, request() logs in with a POST; then it sends the token.
local token = nil

function request()
  if not token then
    return wrk.format("POST", "/login", { ["Content-Type"] = "application/json" }, '{"user":"u1"}')
  end
  return wrk.format("GET", "/api/items", { ["Authorization"] = "Bearer " .. token })
end

function response(status, headers, body)
  if not token and status == 200 and headers["X-Token"] then
    token = headers["X-Token"]
  end
end
