-- wrk script for tests/bench/bench.sh: every request is one device's cold
-- check, POST /api/v1/devices/{id}/ota/check, and no device polls twice in
-- a run while the run sends fewer checks than the fleet has devices.
--
--   wrk -t2 -c64 -d10s -s check.lua URL -- TOKENS MODEL OFFSET THREADS
--
-- TOKENS holds one "device_id token" line per device, all lines of the
-- same width (bench.sh writes them in a shuffled order). Thread t of
-- THREADS owns the t-th contiguous block of lines and reads it
-- sequentially from OFFSET / THREADS lines into the block, wrapping
-- around at the end. A thread that sends more checks than its block holds
-- polls devices twice: done() prints how many such repeats the run made. Lines are read lazily, so start-up costs
-- nothing and memory stays flat however large the fleet.

local threads = {}
local count = 0

function setup(thread)
  thread:set("tid", count)
  count = count + 1
  table.insert(threads, thread)
end

local file, width, lo, hi, pos, block
local sent = 0
local body
local headers = { ["Content-Type"] = "application/json" }
repeats = 0

function init(args)
  local path, model, offset, nthreads = args[1], args[2], tonumber(args[3]), tonumber(args[4])
  if not (path and model and offset and nthreads) then
    error("usage: wrk ... -s check.lua URL -- TOKENS MODEL OFFSET THREADS")
  end
  file = assert(io.open(path, "r"))
  local first = assert(file:read("*l"), "empty token file " .. path)
  width = #first + 1
  local lines = math.floor(file:seek("end") / width)
  if lines * width ~= file:seek("end") then
    error("token file lines are not all " .. width .. " bytes: " .. path)
  end
  block = math.floor(lines / nthreads)
  if block < 1 then
    error("fewer devices than threads")
  end
  lo = tid * block
  hi = lo + block
  pos = lo + (math.floor(offset / nthreads) % block)
  file:seek("set", pos * width)
  body = '{"model":"' .. model .. '","current_version":"1.0.0"}'
end

function request()
  if pos >= hi then
    pos = lo
    file:seek("set", lo * width)
  end
  sent = sent + 1
  if sent > block then
    repeats = repeats + 1
  end
  local line = file:read("*l")
  pos = pos + 1
  local sp = line:find(" ", 1, true)
  headers["Authorization"] = "Bearer " .. line:sub(sp + 1)
  return wrk.format("POST", "/api/v1/devices/" .. line:sub(1, sp - 1) .. "/ota/check", headers, body)
end

function done(summary, latency, requests)
  local r = 0
  for _, t in ipairs(threads) do
    r = r + (t:get("repeats") or 0)
  end
  io.write(string.format("bench: repeats %d\n", r))
end
