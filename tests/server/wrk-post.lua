-- wrk-post.lua — POST a generation request on every connection of a wrk run and count the
-- answers by status. Body from WRK_BODY (default: a short greedy completion), path from
-- WRK_PATH. done() prints one line the tests read:
--   statuses: 200=N 503=M ... other=K total=T
local threads = {}

function setup(thread)
    table.insert(threads, thread)
end

function init(args)
    counts = {}
    wrk.method = "POST"
    wrk.path = os.getenv("WRK_PATH") or "/v1/completions"
    wrk.body = os.getenv("WRK_BODY") or '{"prompt":"Once upon a time","max_tokens":16,"temperature":0}'
    wrk.headers["Content-Type"] = "application/json"
    local key = os.getenv("WRK_API_KEY")
    if key then wrk.headers["Authorization"] = "Bearer " .. key end
end

function response(status, headers, body)
    counts[status] = (counts[status] or 0) + 1
end

function done(summary, latency, requests)
    local all = {}
    for _, t in ipairs(threads) do
        local c = t:get("counts")
        for status, n in pairs(c) do all[status] = (all[status] or 0) + n end
    end
    local keys, total, other = {}, 0, 0
    for status, n in pairs(all) do
        table.insert(keys, status)
        total = total + n
        if status ~= 200 and status ~= 503 then other = other + n end
    end
    table.sort(keys)
    local line = "statuses:"
    for _, s in ipairs(keys) do line = line .. " " .. s .. "=" .. all[s] end
    io.write(line .. " other=" .. other .. " total=" .. total .. "\n")
    io.write(string.format("errors: connect=%d read=%d write=%d status=%d timeout=%d\n",
        summary.errors.connect, summary.errors.read, summary.errors.write,
        summary.errors.status, summary.errors.timeout))
    io.write(string.format("latency_ms: p50=%.1f p99=%.1f max=%.1f\n", latency:percentile(50) / 1e3,
        latency:percentile(99) / 1e3, latency.max / 1e3))
end
