-- wrk script for the MCP benchmark (driven by bench/wrk.py).
--
-- BENCH_WRK_CONFIG names a Lua file returning {path, headers, bodies, method, paths, ok_marker, bad_markers}.
-- Requests are POSTs of `bodies`, round-robin (or, with method GET, GETs of `paths`, round-robin). Every response is checked: HTTP 200, the
-- workload's ok_marker present, no bad marker (a JSON-RPC error or an isError result), so a
-- broken server cannot post a fast number.
--
-- Latency: wrk's own distribution is "corrected" for coordinated omission after the run (it adds
-- synthetic samples for responses slower than twice the mean), which inflates a closed loop's
-- p99. wrk.py runs one connection per thread, so each thread times its own requests here with
-- CLOCK_MONOTONIC and done() merges the histograms. wrk's numbers are reported alongside.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]]
local clock = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(1, clock)
  return tonumber(clock.tv_sec) * 1000000 + math.floor(tonumber(clock.tv_nsec) / 1000)
end

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("thread_index", #threads)
end

function init(args)
  local config = dofile(os.getenv("BENCH_WRK_CONFIG"))
  requests = {}
  if config.method == "GET" then
    for i, path in ipairs(config.paths) do
      requests[i] = wrk.format("GET", path, config.headers, nil)
    end
  else
    for i, body in ipairs(config.bodies) do
      requests[i] = wrk.format("POST", config.path, config.headers, body)
    end
  end
  ok_marker = config.ok_marker
  bad_markers = config.bad_markers
  next_request = thread_index or 1
  started = 0
  hist = {}
  ok, bad_status, rpc_errors = 0, 0, 0
  statuses = {}
end

function request()
  local i = (next_request - 1) % #requests + 1
  next_request = next_request + 1
  started = now_us()
  return requests[i]
end

function response(status, headers, body)
  local elapsed = now_us() - started
  hist[elapsed] = (hist[elapsed] or 0) + 1
  if status ~= 200 then
    bad_status = bad_status + 1
    statuses[status] = (statuses[status] or 0) + 1
    return
  end
  if not body or not body:find(ok_marker, 1, true) then
    rpc_errors = rpc_errors + 1
    return
  end
  for _, marker in ipairs(bad_markers) do
    if body:find(marker, 1, true) then
      rpc_errors = rpc_errors + 1
      return
    end
  end
  ok = ok + 1
end

function done(summary, latency, requests_stats)
  local merged, keys, n = {}, {}, 0
  local total_ok, total_bad, total_rpc = 0, 0, 0
  local codes = {}
  for _, thread in ipairs(threads) do
    total_ok = total_ok + thread:get("ok")
    total_bad = total_bad + thread:get("bad_status")
    total_rpc = total_rpc + thread:get("rpc_errors")
    for code, count in pairs(thread:get("statuses")) do codes[code] = (codes[code] or 0) + count end
    for us, count in pairs(thread:get("hist")) do
      if not merged[us] then table.insert(keys, us) end
      merged[us] = (merged[us] or 0) + count
      n = n + count
    end
  end
  table.sort(keys)
  local function percentile(p)
    if n == 0 then return 0 end
    local rank, seen = math.max(1, math.ceil(p / 100 * n)), 0
    for _, us in ipairs(keys) do
      seen = seen + merged[us]
      if seen >= rank then return us end
    end
    return keys[#keys]
  end
  local code_list = {}
  for code, count in pairs(codes) do table.insert(code_list, string.format('"%d":%d', code, count)) end
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"duration_us":%d,"requests":%d,"timed":%d,"ok":%d,"bad_status":%d,"rpc_errors":%d,' ..
    '"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,"statuses":{%s},' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"wrk_p50_us":%d,"wrk_p99_us":%d}\n',
    summary.duration, summary.requests, n, total_ok, total_bad, total_rpc,
    e.connect, e.read, e.write, e.timeout, table.concat(code_list, ","),
    percentile(50), percentile(90), percentile(99), keys[#keys] or 0,
    latency:percentile(50), latency:percentile(99)))
end
