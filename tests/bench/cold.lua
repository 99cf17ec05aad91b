-- wrk script for `make bench`: every request is a distinct, never-cached table (a new offset), so
-- each one is a cache miss: computed on the HTTP thread when small enough (inline_max_us), else a
-- job on the worker pool while the connection is suspended.
-- PE_COLD_PATH is the table without offset; PE_COLD_BASE keeps separate runs from sharing offsets.
-- Each wrk thread gets its own offset range (threads do not share Lua state).
local path = os.getenv("PE_COLD_PATH") or "/v1/sinusoidal?len=16&dim=16"
local base = tonumber(os.getenv("PE_COLD_BASE") or "1000000000")
local threads = 0

function setup(thread)
	thread:set("tid", threads)
	threads = threads + 1
end

local n = 0
function request()
	n = n + 1
	return wrk.format("GET", path .. "&offset=" .. string.format("%d", base + tid * 100000000 + n))
end
