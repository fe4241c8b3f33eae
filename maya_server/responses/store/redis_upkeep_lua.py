"""The Redis store's upkeep scripts: what keeps the shared store true and usable when Redis itself took something.

EVICT frees room when Redis refuses a PUT for memory (its `maxmemory` under `noeviction`): it removes the fleet's
least recently used entries, and its first write is a DEL, which a full Redis never refuses. RECOUNT rebuilds
every bookkeeping key and figure from the data keys that really exist, after Redis lost keys behind Maya's back
(an eviction, a flush, a person's DEL) or a script flagged bookkeeping it could not trust (`P dirty`): broken
entries (a data key they need is gone) and unreferenced blocks go, and the counts become complete again. It is the
only script that deletes a block no count vouches for, and it never deletes an entry whose data keys are all
there.
Both are run rarely (`store/redis.py` loads them on a probe, while Redis has room to compile them), so they live
apart from the scripts every request runs (`store/redis_lua.py`, whose COMMON functions and key layout they share):

    P recount      string the fleet's recount lock (SET NX PX: at most one recount per probe interval)
"""

from .redis_lua import COMMON

EVICT = COMMON + r"""
-- ARGV: P BLOCK SLOT LINEAGE | want most: Redis refused a PUT for memory; remove the fleet's least recently used
-- entries until `want` bytes (as counted) are freed, at most `most` of them (ghosts, entries Redis lost, are
-- dropped on the way and not counted as evictions). {evicted, freed, entries, bytes}
local want, most = tonumber(ARGV[5]), tonumber(ARGV[6])
local before = figures()[2]
local count, looked = 0, 0
while looked < most do
  looked = looked + 1
  local oldest = redis.call('ZRANGE', P .. 'lru', 0, 0)
  if #oldest == 0 then break end
  if remove(oldest[1], nil) then count = count + 1 end
  if before - figures()[2] >= want then break end
end
if count > 0 then redis.call('HINCRBY', P .. 'n', 'evictions', count) end
local n = figures()
return {count, before - n[2], n[1], n[2]}
"""

RECOUNT = COMMON + r"""
-- ARGV: P BLOCK SLOT LINEAGE | most_named fresh_generation
-- Rebuild everything derived from the entries that really exist: drop broken entries (a field, the lineage's
-- length, a block or the envelope missing), then users sets, lineage lengths (a lineage cut back gets a fresh
-- generation), generations of lineages in use, complete rc hashes, orphan blocks, per-owner bytes and entries, the
-- fleet's entries, bytes and seq, the lru, owner lru and expiry sets. Bounded by the keys under P (SCAN: the
-- store's own bounds bound them).
-- {entries, bytes, broken, orphan blocks, rid, kind, ... (the first `most_named` broken entries)}
local most_named = tonumber(ARGV[5])
local fresh = ARGV[6]  -- a generation never used before (random, from the replica), so no continuation in flight
                      -- holds it
redis.call('DEL', P .. 'dirty')  -- what any script flagged is rebuilt now
local GLOB = (P:gsub('[%*%?%[%]\\]', '\\%0'))

local function scan(pattern)
  local seen, keys, cursor = {}, {}, '0'
  repeat
    local got = redis.call('SCAN', cursor, 'MATCH', GLOB .. pattern, 'COUNT', 1000)
    cursor = got[1]
    for _, key in ipairs(got[2]) do
      if not seen[key] then
        seen[key] = true
        keys[#keys + 1] = key
      end
    end
  until cursor == '0'
  return keys
end

local function strip(key, part) return key:sub(#P + #part + 1) end

-- the entries, and each lineage's owner and longest use
local entries, order, lineages, lost = {}, {}, {}, {}
local function lose(rid, kind)
  lost[#lost + 1] = {rid, kind}
  entries[rid] = nil
end
for _, key in ipairs(scan('e:*')) do
  local rid = strip(key, 'e:')
  local f = redis.pcall('HMGET', key, 'o', 'l', 'ie', 'oe', 'env', 'x', 'c', 'own')
  if type(f) == 'table' and not f.err then
    order[#order + 1] = rid
    local whole = true
    for i = 1, 8 do whole = whole and f[i] ~= false end
    if not whole then
      lose(rid, 'entry')
    else
      entries[rid] = {o = f[1], l = f[2], ie = tonumber(f[3]), oe = tonumber(f[4]), env = f[5], x = f[6],
                      c = tonumber(f[7])}
    end
  end
end
for _, rid in ipairs(order) do
  local e = entries[rid]
  if e then
    local lin = lineages[e.l]
    if not lin then
      lin = {o = e.o, top = 0}
      lineages[e.l] = lin
    end
    if lin.o ~= e.o or e.ie > e.oe then
      lose(rid, 'entry')
    elseif e.oe > lin.top then
      lin.top = e.oe
    end
  end
end

-- each lineage's first missing slot (its length, or a missing block); entries past it are broken
local firstgap = {}
for lid, lin in pairs(lineages) do
  local digests = {}
  if lin.top > 0 then digests = redis.call('LRANGE', P .. 'l:' .. lid, 0, lin.top - 1) end
  local gap = #digests
  for i = 1, #digests, 1000 do
    local keys = {}
    for j = i, math.min(i + 999, #digests) do keys[#keys + 1] = block_key(lin.o, digests[j]) end
    if redis.call('EXISTS', unpack(keys)) ~= #keys then
      for j = i, math.min(i + 999, #digests) do
        if redis.call('EXISTS', block_key(lin.o, digests[j])) == 0 then
          gap = j - 1
          break
        end
      end
      break
    end
  end
  firstgap[lid] = gap
  lin.digests = digests
end
local envelopes = {}
for _, rid in ipairs(order) do
  local e = entries[rid]
  if e then
    local ekey = block_key(e.o, e.env)
    if envelopes[ekey] == nil then envelopes[ekey] = redis.call('EXISTS', ekey) == 1 end
    if #lineages[e.l].digests < e.oe then
      lose(rid, 'lineage')
    elseif firstgap[e.l] < e.oe then
      lose(rid, 'block')
    elseif not envelopes[ekey] then
      lose(rid, 'envelope')
    end
  end
end
for _, pair in ipairs(lost) do redis.call('DEL', P .. 'e:' .. pair[1]) end

-- what the whole entries use
local used, rc, owners = {}, {}, {}
local function owner(o)
  if not owners[o] then owners[o] = {bytes = 0, entries = 0} end
  return owners[o]
end
local function ref(o, dg)
  rc[o] = rc[o] or {}
  rc[o][dg] = (rc[o][dg] or 0) + 1
end
local count = 0
for _, rid in ipairs(order) do
  local e = entries[rid]
  if e then
    count = count + 1
    local lin = used[e.l]
    if not lin then
      lin = {o = e.o, top = 0, users = {}}
      used[e.l] = lin
    end
    if e.oe > lin.top then lin.top = e.oe end
    lin.users[#lin.users + 1] = {e.oe, rid}
    ref(e.o, e.env)
    local ow = owner(e.o)
    ow.entries = ow.entries + 1
    ow.bytes = ow.bytes + e.c
  end
end

-- lineages: cut back to their longest use (a new generation: the block cache's hints for it are stale), drop the
-- unused, rebuild users sets and generations
for _, key in ipairs(scan('l:*')) do
  local lid = strip(key, 'l:')
  local lin = used[lid]
  if not lin or lin.top == 0 then
    redis.call('DEL', key)
  elseif redis.call('LLEN', key) > lin.top then
    redis.call('LTRIM', key, 0, lin.top - 1)
    redis.call('HSET', P .. 'g', lid, fresh)
  end
end
for _, key in ipairs(scan('u:*')) do redis.call('DEL', key) end
local gens = redis.call('HGETALL', P .. 'g')
for i = 1, #gens, 2 do
  if not used[gens[i]] then redis.call('HDEL', P .. 'g', gens[i]) end
end
for lid, lin in pairs(used) do
  local ukey = P .. 'u:' .. lid
  for i = 1, #lin.users, 1000 do
    local args = {}
    for j = i, math.min(i + 999, #lin.users) do
      args[#args + 1] = lin.users[j][1]
      args[#args + 1] = lin.users[j][2]
    end
    redis.call('ZADD', ukey, unpack(args))
  end
  redis.call('HSETNX', P .. 'g', lid, fresh)
  local ow = owner(lin.o)
  ow.bytes = ow.bytes + LINEAGE + SLOT * lin.top
  for i = 1, lin.top do ref(lin.o, lineages[lid].digests[i]) end
end

-- refcounts and blocks: orphans deleted, the referenced ones charged
for _, key in ipairs(scan('rc:*')) do redis.call('DEL', key) end
for o, counts in pairs(rc) do
  local args = {TRUSTED, 1}
  for dg, k in pairs(counts) do
    args[#args + 1] = dg
    args[#args + 1] = k
    owner(o).bytes = owner(o).bytes + redis.call('STRLEN', block_key(o, dg)) + BLOCK
    if #args == 2000 then
      redis.call('HSET', P .. 'rc:' .. o, unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('HSET', P .. 'rc:' .. o, unpack(args)) end
end
local orphans = 0
for _, key in ipairs(scan('b:*')) do
  local o, dg = strip(key, 'b:'):match('^([^:]*):(.*)$')
  if not (o and rc[o] and rc[o][dg]) then
    redis.call('DEL', key)
    orphans = orphans + 1
  end
end

-- per-owner figures and the fleet's
redis.call('DEL', P .. 'ob', P .. 'oe')
local total = 0
for o, ow in pairs(owners) do
  redis.call('HSET', P .. 'ob', o, string.format('%d', ow.bytes))
  if ow.entries > 0 then redis.call('HSET', P .. 'oe', o, ow.entries) end
  total = total + ow.bytes
end

-- the lru, owner lru and expiry sets: members without a whole entry dropped, entries missing from them added
local seq = 0
local function prune(key, keep, sequenced)
  local members = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  for i = 1, #members, 2 do
    if keep(members[i]) then
      if sequenced then seq = math.max(seq, tonumber(members[i + 1])) end
    else
      redis.call('ZREM', key, members[i])
    end
  end
end
prune(P .. 'lru', function(rid) return entries[rid] ~= nil end, true)
for _, key in ipairs(scan('lru:*')) do
  local o = strip(key, 'lru:')
  prune(key, function(rid) return entries[rid] ~= nil and entries[rid].o == o end, true)
end
prune(P .. 'exp', function(rid) return entries[rid] ~= nil end)
for rid, e in pairs(entries) do
  local score = redis.call('ZSCORE', P .. 'lru', rid)
  if not score then  -- its last use as the owner's index has it, else the first to go
    score = redis.call('ZSCORE', P .. 'lru:' .. e.o, rid) or 0
    redis.call('ZADD', P .. 'lru', score, rid)
  end
  redis.call('ZADD', P .. 'lru:' .. e.o, 'NX', score, rid)
  redis.call('ZADD', P .. 'exp', e.x, rid)
end
local n = redis.call('HMGET', P .. 'n', 'seq')
redis.call('HSET', P .. 'n', 'entries', count, 'bytes', string.format('%d', total),
           'seq', string.format('%d', math.max(seq, tonumber(n[1]) or 0)))
local out = {count, total, #lost, orphans}
for i = 1, math.min(#lost, most_named) do
  out[#out + 1] = lost[i][1]
  out[#out + 1] = lost[i][2]
end
return out
"""
