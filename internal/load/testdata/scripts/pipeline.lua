-- A pipeline: request() returns three requests at once.
local req

function init(args)
  req = wrk.format(nil, "/p1") .. wrk.format(nil, "/p2") .. wrk.format("POST", "/p3", nil, "three")
end

function request()
  return req
end
