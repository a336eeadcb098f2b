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

// luaSetMark reads and writes a waiting set's priority mark (SetMark):
// setmark tells a set's mark from anything else at a mark's key, fresh
// a mark without priority (SetMarkFresh) from one with it, sameset a
// mark of the same acquisition (its id, whatever its priority), before
// compares two marks byte by byte (Lua's < follows the server's locale),
// and mark writes the set's own mark own at key, for px milliseconds,
// unless an older set's mark, or a key that is no mark, is there.
const luaSetMark = `local setprefix, freshprefix = "` + SetMarkPrefix + `", "` + SetMarkPrefix + freshPrio + `:"
local function setmark(v)
	return type(v) == "string" and string.sub(v, 1, #setprefix) == setprefix
end
local function fresh(v)
	return string.sub(v, 1, #freshprefix) == freshprefix
end
local function sameset(v, own)
	return setmark(v) and #v > #setprefix + 16 and string.sub(v, #setprefix + 17) == string.sub(own, #setprefix + 17)
end
local function before(a, b)
	for i = 1, math.min(#a, #b) do
		local x, y = string.byte(a, i), string.byte(b, i)
		if x ~= y then
			return x < y
		end
	end
	return #a < #b
end
local function mark(key, own, px)
	local m = redis.call("get", key)
	if not m or m == "1" or m == own or (setmark(m) and before(own, m)) then
		redis.call("set", key, own, "PX", px)
	end
end
`

const luaAcquireAll = `local ttl, n, fenced = int(ARGV[2]), int(ARGV[3]), ARGV[4] == "1"
local guarded = ARGV[5] ~= nil and ARGV[5] ~= ""
local own = ARGV[6] ~= nil and ARGV[6] ~= "" and ARGV[6]
if not ttl or ttl < 1 then
	return redis.error_reply("ERR acquire-all: invalid TTL " .. tostring(ARGV[2]))
end
if own and not setmark(own) then
	return redis.error_reply("ERR acquire-all: invalid mark " .. own)
end
if not n or n < 1 or not (fenced or ARGV[4] == "0") or #KEYS ~= n * (1 + (fenced and 1 or 0) + (own and 1 or 0)) + (guarded and 1 or 0) then
	return redis.error_reply("ERR acquire-all: " .. #KEYS .. " keys do not match n " .. tostring(ARGV[3]) .. ", fenced " .. tostring(ARGV[4]) .. ", guard " .. tostring(ARGV[5]) .. ", mark " .. tostring(ARGV[6]))
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
local m0 = n * (fenced and 2 or 1)
if own then
	for i = m0 + 1, m0 + n do
		local m = redis.call("get", KEYS[i])
		if setmark(m) and m ~= own and not fresh(m) and before(m, own) then
			return 0 -- a set that has waited longer waits for this key
		end
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
	if own and sameset(redis.call("get", KEYS[m0 + i]), own) then
		redis.call("del", KEYS[m0 + i])
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
local queued = ARGV[3] ~= nil and ARGV[3] ~= ""
local own = ARGV[5] ~= nil and ARGV[5] ~= "" and ARGV[5]
if not n or n < 1 or #KEYS ~= n * (1 + (queued and 1 or 0) + (own and 1 or 0)) then
	return redis.error_reply("ERR release-all: " .. #KEYS .. " keys do not match n " .. tostring(ARGV[2]) .. ", channel " .. tostring(ARGV[3]) .. ", mark " .. tostring(ARGV[5]))
end
local px = int(ARGV[4])
if own and (not setmark(own) or not px or px < 1) then
	return redis.error_reply("ERR release-all: invalid mark " .. own .. " or mark expiry " .. tostring(ARGV[4]))
end
local held, answer = 0, 1
for i = 1, n do
	if redis.call("get", KEYS[i]) == ARGV[1] then
		redis.call("del", KEYS[i])
		held = held + 1
		if queued and handoff(KEYS[n + i], ARGV[3] .. KEYS[i]) == 2 then
			answer = 2
		end
	end
end
if own then
	local m0 = n * (queued and 2 or 1)
	for i = m0 + 1, m0 + n do
		mark(KEYS[i], own, ARGV[4])
	end
end
if held == 0 then
	return 0
end
return answer`

const luaEnqueueAll = `local ttl, p = int(ARGV[2]), int(ARGV[4])
local n = #KEYS / 2
if not ttl or ttl < 1 then
	return redis.error_reply("ERR enqueue-all: invalid queue TTL " .. tostring(ARGV[2]))
end
if #KEYS < 2 or #KEYS % 2 ~= 0 or not p or p < 1 or p > n then
	return redis.error_reply("ERR enqueue-all: " .. #KEYS .. " keys do not match preferred index " .. tostring(ARGV[4]))
end
local at = 0
if redis.call("exists", KEYS[p]) == 1 then
	at = p
else
	for i = 1, n do
		if redis.call("exists", KEYS[i]) == 1 then
			at = i
			break
		end
	end
end
if at == 0 then
	if ARGV[3] ~= "force" then
		return 0
	end
	at = p
end
redis.call("rpush", KEYS[n + at], ARGV[1])
redis.call("pexpire", KEYS[n + at], ARGV[2])
return at`

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
if v and v ~= shared then
	return 0
end
if ARGV[5] ~= "1" then -- a reader handed the key passes a waiting writer's or set's mark
	local m = redis.call("get", KEYS[3])
	if m == "1" or setmark(m) then
		return 0
	end
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
