-- thread:stop(): each thread stops after 50 responses.
local n = 0

function response(status, headers, body)
  n = n + 1
  if n == 50 then
    wrk.thread:stop()
  end
end
