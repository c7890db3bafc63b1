-- Per-thread counters gathered in done through thread:get, a static
-- request per thread (no request()), and done's arguments printed in a
-- fixed format: each line is "done <key> <type>".
local threads = {}
local counter = 1

function setup(thread)
  thread:set("id", counter)
  thread:set("conf", { name = "t" .. counter }) -- wrk 4.1 crashes on nested tables
  table.insert(threads, thread)
  counter = counter + 1
end

function init(args)
  responses = 0
  wrk.method = "PUT"
  wrk.body = "from thread " .. id
  wrk.headers["X-Thread"] = conf.name
end

function response(status, headers, body)
  responses = responses + 1
end

local function shape(prefix, v)
  print(string.format("done %s %s", prefix, type(v)))
end

function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do
    total = total + t:get("responses")
    shape("thread.id", t:get("id"))
    shape("thread.conf.name", t:get("conf").name)
    shape("thread.addr", tostring(t.addr))
  end
  print(string.format("done threads %d", #threads))
  print(string.format("done counted %s", total == summary.requests and "all" or "some"))
  for _, k in ipairs({ "duration", "requests", "bytes" }) do
    shape("summary." .. k, summary[k])
  end
  for _, k in ipairs({ "connect", "read", "write", "status", "timeout" }) do
    shape("summary.errors." .. k, summary.errors[k])
  end
  for name, s in pairs({ latency = latency, requests = requests }) do
    for _, k in ipairs({ "min", "max", "mean", "stdev" }) do
      shape(name .. "." .. k, s[k])
    end
    shape(name .. ".percentile(99)", s:percentile(99))
    shape(name .. ".#", #s)
    local v, n = s(1)
    shape(name .. "(1).value", v)
    shape(name .. "(1).count", n)
  end
end
