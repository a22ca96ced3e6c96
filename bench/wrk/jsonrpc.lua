-- wrk script for bench/run: POSTs JSON-RPC bodies read from a file (one body per line),
-- checks every answer, and prints one parseable result line at the end.
--
--   wrk -t1 -c64 -d10s -s bench/wrk/jsonrpc.lua URL -- BODIES [cycle|stream] [START_OFFSET]
--
-- cycle (default): the bodies are loaded once and sent round-robin; each thread starts at
--   its own index so threads do not send the same body in step.
-- stream: each body is sent once, read from the file as needed, starting at byte
--   START_OFFSET (for sendTransaction, whose signatures must be new); one thread only. At the
--   end of the file it starts over and counts a wrap: the answers are then duplicates.
--
-- An answer counts as correct when its HTTP status is 200 and its JSON-RPC body holds a
-- "result" and no "error" (for a batch: no element with an error). "already been processed"
-- errors are counted apart as duplicates. The last line printed is
--   WRK_RESULT {json}
-- with requests, duration, req/s, latency percentiles (µs) and the error counts.
--
-- With WRK_DELAY_MS set in the environment, each connection waits that many milliseconds
-- before each request, so a small connection count gives a bounded rate (bench/resilience).

local threads = {}
local thread_count = 0

function setup(thread)
  thread:set("thread_index", thread_count)
  thread_count = thread_count + 1
  table.insert(threads, thread)
end

local bodies_path
local mode
local requests = {}
local request_count = 0
local next_request = 1
local stream
local headers = { ["Content-Type"] = "application/json" }
-- With WRK_API_KEY set in the environment, every request carries it as x-api-key.
local api_key = os.getenv("WRK_API_KEY")
if api_key ~= nil and #api_key > 0 then headers["x-api-key"] = api_key end

local think_ms = tonumber(os.getenv("WRK_DELAY_MS") or "")
if think_ms ~= nil and think_ms > 0 then
  function delay() return think_ms end
end

-- Per-thread counters, read by done() through thread:get().
checked = 0
http_errors = 0
rpc_errors = 0
duplicates = 0
missing_result = 0
wraps = 0
stream_offset = 0

function init(args)
  bodies_path = args[1]
  mode = args[2] or "cycle"
  if bodies_path == nil then
    error("usage: -- BODIES [cycle|stream] [START_OFFSET]")
  end
  if mode == "stream" then
    stream = assert(io.open(bodies_path, "r"))
    stream:seek("set", tonumber(args[3] or "0"))
  else
    for line in io.lines(bodies_path) do
      if #line > 0 then
        request_count = request_count + 1
        requests[request_count] = wrk.format("POST", "/", headers, line)
      end
    end
    assert(request_count > 0, "no bodies in " .. bodies_path)
    next_request = (thread_index * 7919) % request_count + 1
  end
end

function request()
  if mode == "stream" then
    local line = stream:read("*l")
    if line == nil or #line == 0 then
      wraps = wraps + 1
      stream:seek("set", 0)
      line = stream:read("*l")
    end
    stream_offset = stream:seek()
    return wrk.format("POST", "/", headers, line)
  end
  local r = requests[next_request]
  next_request = next_request + 1
  if next_request > request_count then next_request = 1 end
  return r
end

function response(status, headers, body)
  checked = checked + 1
  if status ~= 200 then
    http_errors = http_errors + 1
  elseif string.find(body, '"error"', 1, true) then
    if string.find(body, "already been processed", 1, true) then
      duplicates = duplicates + 1
    else
      rpc_errors = rpc_errors + 1
    end
  elseif not string.find(body, '"result"', 1, true) then
    missing_result = missing_result + 1
  end
end

function done(summary, latency, requests)
  local totals = { checked = 0, http_errors = 0, rpc_errors = 0, duplicates = 0,
                   missing_result = 0, wraps = 0 }
  local offset = 0
  for _, thread in ipairs(threads) do
    for name, _ in pairs(totals) do
      totals[name] = totals[name] + (thread:get(name) or 0)
    end
    offset = math.max(offset, thread:get("stream_offset") or 0)
  end
  local seconds = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,"rps":%.1f,' ..
    '"latency_us":{"min":%d,"mean":%.1f,"stdev":%.1f,"max":%d,' ..
    '"p50":%d,"p90":%d,"p99":%d,"p999":%d},' ..
    '"socket_errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},"non2xx":%d,' ..
    '"checked":%d,"http_errors":%d,"rpc_errors":%d,"duplicates":%d,"missing_result":%d,' ..
    '"stream_wraps":%d,"stream_offset":%d}\n',
    summary.requests, summary.duration, summary.bytes, summary.requests / seconds,
    latency.min, latency.mean, latency.stdev, latency.max,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9),
    e.connect, e.read, e.write, e.timeout, e.status,
    totals.checked, totals.http_errors, totals.rpc_errors, totals.duplicates,
    totals.missing_result, totals.wraps, offset))
end
