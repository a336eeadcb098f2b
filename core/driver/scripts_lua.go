package driver

// The Lua of the shared and multi-key scripts, in pieces that several
// scripts begin with. Each script checks its arguments before it writes
// anything, since Redis keeps the writes of a script that fails half-way.

// luaInt reads a decimal integer argument: nil for anything else.
const luaInt = `local function int(s)
	if s and string.match(s, "^%-?%d+$") then
		return tonumber(s)
	end
end
`

// luaNow reads the server's TIME in whole milliseconds.
const luaNow = `local function now()
	local t = redis.call("time")
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// luaAge is ScriptAcquireGuarded's age check: the node's age in
// milliseconds from the birth key bkey (written first when missing), or
// nil for an adopted node (birth 0).
const luaAge = `local function age(bkey, t)
	local born = tonumber(redis.call("get", bkey))
	if not born then
		born = t
		local info = redis.pcall("info", "server")
		if type(info) == "string" then
			local up = tonumber(string.match(info, "uptime_in_seconds:(%d+)"))
			if up then
				born = t - up * 1000
			end
		end
		redis.call("set", bkey, string.format("%d", born))
	end
	if born == 0 then
		return nil
	end
	return math.max(t - born, 0)
end
`

// luaShared names SharedValue.
const luaShared = `local shared = "` + SharedValue + `"
`

// luaStretch makes the readers set, and the key while it holds
// SharedValue, expire with the set's last reader. It never touches a key
// that holds anything else: a writer's TTL is the writer's.
const luaStretch = `local function stretch(key, set)
	local top = redis.call("zrange", set, -1, -1, "WITHSCORES")
	if not top[2] then
		return
	end
	local at = string.format("%d", tonumber(top[2]))
	redis.call("pexpireat", set, at)
	if redis.call("get", key) == shared then
		redis.call("pexpireat", key, at)
	end
end
`

// luaHandOff is the end of ScriptRelease: with a queue and a channel
// prefix, pop the oldest ticket and publish it on its owner's channel
// (2), else 1. A shared waiter's ticket (ReaderTicket) also pops and
// publishes every shared waiter's ticket queued right behind it: readers
// wake together.
const luaHandOff = `local function handoff(queue, prefix)
	local ticket = queue and prefix and redis.call("lpop", queue)
	if not ticket then
		return 1
	end
	while true do
		redis.call("publish", prefix .. ":" .. string.match(ticket, "^[^.]*"), ticket)
		if not string.match(ticket, "^[^.]*%.R") then
			return 2
		end
		local nxt = redis.call("lindex", queue, 0)
		if not nxt or not string.match(nxt, "^[^.]*%.R") then
			return 2
		end
		ticket = redis.call("lpop", queue)
	end
end
`

const luaAcquireAll = `local ttl, n, fenced = int(ARGV[2]), int(ARGV[3]), ARGV[4] == "1"
local guarded = ARGV[5] ~= nil and ARGV[5] ~= ""
if not ttl or ttl < 1 then
	return redis.error_reply("ERR acquire-all: invalid TTL " .. tostring(ARGV[2]))
end
if not n or n < 1 or not (fenced or ARGV[4] == "0") or #KEYS ~= n * (fenced and 2 or 1) + (guarded and 1 or 0) then
	return redis.error_reply("ERR acquire-all: " .. #KEYS .. " keys do not match n " .. tostring(ARGV[3]) .. ", fenced " .. tostring(ARGV[4]) .. ", guard " .. tostring(ARGV[5]))
end
if guarded then
	local min = int(ARGV[5])
	if not min then
		return redis.error_reply("ERR acquire-all: invalid minimum age " .. ARGV[5])
	end
	local a = age(KEYS[#KEYS], now())
	if a and a < min then
		return -1 - a
	end
end
for i = 1, n do
	if redis.call("exists", KEYS[i]) == 1 then
		return 0
	end
end
local t = 1
if fenced then
	for i = n + 1, 2 * n do
		local c = redis.call("get", KEYS[i])
		if c and not int(c) then
			return redis.error_reply("ERR acquire-all: fencing counter " .. KEYS[i] .. " is not an integer")
		end
		t = math.max(t, (int(c) or 0) + 1)
	end
end
for i = 1, n do
	redis.call("set", KEYS[i], ARGV[1], "PX", ARGV[2])
	if fenced then
		redis.call("set", KEYS[n + i], string.format("%d", t))
	end
end
return t`

const luaExtendAll = `local ttl = int(ARGV[2])
if not ttl or ttl < 1 then
	return redis.error_reply("ERR extend-all: invalid TTL " .. tostring(ARGV[2]))
end
if #KEYS < 1 then
	return redis.error_reply("ERR extend-all: no keys")
end
for i = 1, #KEYS do
	if redis.call("get", KEYS[i]) ~= ARGV[1] then
		return 0
	end
end
for i = 1, #KEYS do
	redis.call("pexpire", KEYS[i], ARGV[2])
end
return 1`

const luaReleaseAll = `local n = int(ARGV[2])
if not n or n < 1 or (#KEYS ~= n and #KEYS ~= n + 1) then
	return redis.error_reply("ERR release-all: " .. #KEYS .. " keys do not match n " .. tostring(ARGV[2]))
end
local held, first = 0, false
for i = 1, n do
	if redis.call("get", KEYS[i]) == ARGV[1] then
		redis.call("del", KEYS[i])
		held = held + 1
		first = first or i == 1
	end
end
if held == 0 then
	return 0
end
if not first then
	return 1
end
return handoff(KEYS[n + 1], ARGV[3])`

const luaAcquireShared = `local ttl, fenced = int(ARGV[2]), ARGV[3] == "1"
local guarded = ARGV[4] ~= nil and ARGV[4] ~= ""
if not ttl or ttl < 1 then
	return redis.error_reply("ERR acquire-shared: invalid TTL " .. tostring(ARGV[2]))
end
if not (fenced or ARGV[3] == "0") or #KEYS ~= 3 + (fenced and 1 or 0) + (guarded and 1 or 0) then
	return redis.error_reply("ERR acquire-shared: " .. #KEYS .. " keys do not match fenced " .. tostring(ARGV[3]) .. ", guard " .. tostring(ARGV[4]))
end
local t = now()
if guarded then
	local min = int(ARGV[4])
	if not min then
		return redis.error_reply("ERR acquire-shared: invalid minimum age " .. ARGV[4])
	end
	local a = age(KEYS[#KEYS], t)
	if a and a < min then
		return -1 - a
	end
end
redis.call("zremrangebyscore", KEYS[2], "-inf", string.format("%d", t))
local v = redis.call("get", KEYS[1])
if (v and v ~= shared) or ARGV[5] ~= "1" and redis.call("get", KEYS[3]) == "1" then
	return 0
end
if fenced then
	local c = redis.call("get", KEYS[4])
	if c and not int(c) then
		return redis.error_reply("ERR acquire-shared: fencing counter " .. KEYS[4] .. " is not an integer")
	end
end
if not v then
	redis.call("del", KEYS[2]) -- readers left without their key are stale
end
redis.call("zadd", KEYS[2], string.format("%d", t + ttl), ARGV[1])
redis.call("set", KEYS[1], shared)
stretch(KEYS[1], KEYS[2])
if fenced then
	return redis.call("incr", KEYS[4])
end
return 1`

const luaExtendShared = `local ttl = int(ARGV[2])
if not ttl or ttl < 1 then
	return redis.error_reply("ERR extend-shared: invalid TTL " .. tostring(ARGV[2]))
end
local t = now()
redis.call("zremrangebyscore", KEYS[2], "-inf", string.format("%d", t))
if redis.call("get", KEYS[1]) ~= shared or not redis.call("zscore", KEYS[2], ARGV[1]) then
	return 0
end
redis.call("zadd", KEYS[2], "XX", string.format("%d", t + ttl), ARGV[1])
stretch(KEYS[1], KEYS[2])
return 1`

const luaReleaseShared = `redis.call("zremrangebyscore", KEYS[2], "-inf", string.format("%d", now()))
if redis.call("zrem", KEYS[2], ARGV[1]) == 0 then
	return 0
end
if redis.call("zcard", KEYS[2]) > 0 then
	stretch(KEYS[1], KEYS[2])
	return 1
end
redis.call("del", KEYS[2])
if redis.call("get", KEYS[1]) ~= shared then
	return 1
end
redis.call("del", KEYS[1])
return handoff(KEYS[3], ARGV[2])`

const luaWithdraw = `local px = int(ARGV[2])
if not px or px < 1 then
	return redis.error_reply("ERR withdraw: invalid mark expiry " .. tostring(ARGV[2]))
end
local v = redis.call("get", KEYS[1])
if v == ARGV[1] then
	redis.call("del", KEYS[1])
	return handoff(KEYS[3], ARGV[3])
end
local m = redis.call("get", KEYS[2])
if v == shared and (not m or m == "1") then -- never another's key of that name
	redis.call("set", KEYS[2], "1", "PX", ARGV[2])
end
return 0`
