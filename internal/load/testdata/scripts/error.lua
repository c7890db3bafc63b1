function request()
  return wrk.format(nil, "/x")
end

function response(status, headers, body)
  local t = nil
  return t.field
end
