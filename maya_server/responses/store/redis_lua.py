"""The Redis store's Lua scripts: every change to the shared store is one script, so it is atomic for the fleet.

A script runs alone on the Redis server, so a put, a read or a delete is never seen half-done by any
replica, and the entry, byte and owner bounds are checked and enforced (LRU eviction) in the same step
as the write that would break them. Keys (P is the configured prefix, O an owner scope, never a
credential; see `store/redis.py`), in two kinds:

Data keys: what a response is made of. Each carries a TTL (its latest user's expiry plus `DATA_TTL_MARGIN_S`,
extended as references are added), so a Redis evicting under `volatile-lru` / `volatile-lfu` may take them,
never the bookkeeping; but an envelope block, which every response of one owner and settings shares:

    P e:RID        hash   one stored response: o (owner scope), l (lineage id), ie/oe (its input and output
                          end in the lineage), own (its own JSON), env (its envelope's digest), x (expiry, s),
                          c (the bytes charged for the entry itself)
    P l:LID        list   a lineage: the digests of its blocks, in order (shared by one chain's responses); LID is
                          random (from the writing replica), so no lineage id is ever handed out twice
    P b:O:DIGEST   string one item's (or envelope's) JSON, stored once per owner scope

Bookkeeping keys: derived from the data keys, no TTL; RECOUNT (`store/redis_upkeep_lua.py`) rebuilds them all:

    P u:LID        zset   the lineage's users: response id -> the end of the slice it uses
    P g            hash   lineage id -> generation: '0' when new, and a token never used before (the id of the
                          response whose removal cut it back, or RECOUNT's random one) whenever it is cut back. A
                          continuation extends or copies the lineage only at the generation it read, so only slots
                          it read; a generation lost is no generation (the history is written again)
    P rc:O         hash   digest -> references (lineage slots and entries) to that block; the field `#` says the
                          counts are complete (written by RECOUNT or for an owner that had nothing)
    P lru, P lru:O zset   response id -> last use (a shared sequence): the fleet's and the owner's LRU order
    P exp          zset   response id -> expiry time (seconds, the replicas' wall clock)
    P n            hash   fleet figures: entries, bytes, seq, writes, evictions, ...
    P ob, P oe     hash   owner scope -> bytes, entries
    P dirty        string set when a script found bookkeeping it cannot trust: the next probe recounts

The bytes charged are what Redis holds for them (the JSON plus a per-key overhead measured with MEMORY USAGE,
passed in as ARGV by `store/redis.py`), so the byte bounds bound Redis's memory.

Redis may lose keys behind Maya's back (an eviction, a person's DEL, a restart that kept an older snapshot). So a
read is whole or it is an error: READ and DELETE check every key the entry needs (its fields, the lineage long
enough, every block of the slice, the envelope) and, when one is missing, remove the broken entry in the same step
and say which kind of key was missing ({2, kind}); never a shorter history. And nothing is deleted because a
bookkeeping key is missing: a block is deleted only when a complete `rc:O` counts its last reference gone, a
lineage cut back only when its users set exists and the response really left it; an unknown count leaves the
block where it is and flags a recount. An entry Redis lost still gives back its place in the figures (a ghost).
PUT writes a block again when its refcount says it exists but its key is gone, and extends or copies a lineage
only at the generation the continuation read and with every block there. Reads never
need to write: their LRU touch and expiry purge are best-effort, since Redis at `maxmemory` under `noeviction`
refuses a script's first memory-growing write (not a DEL, ZREM or HDEL, and nothing once the script has written).
Freeing room on a full Redis and rebuilding the bookkeeping are `store/redis_upkeep_lua.py`'s.
"""

DATA_TTL_MARGIN_S = 3600
"""How long a data key outlives its latest user's expiry: Maya drops expired entries itself (every script purges);
the TTL is what makes data keys, and only them, evictable under `volatile-*`, and a backstop after a long outage."""

COMMON = r"""
local P = ARGV[1]
local BLOCK, SLOT, LINEAGE = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

local function charge(o, n)
  if n == 0 then return end
  redis.call('HINCRBY', P .. 'n', 'bytes', n)
  if redis.call('HINCRBY', P .. 'ob', o, n) == 0 then redis.call('HDEL', P .. 'ob', o) end
end

local function block_key(o, dg)
  return P .. 'b:' .. o .. ':' .. dg
end

-- Bookkeeping this script cannot trust (a count, a users set or an index missing): the next probe recounts.
-- A SET after the script's first write, or at worst refused (pcall): the read or delete still answers.
local function flag()
  redis.pcall('SET', P .. 'dirty', 1)
end

local TRUSTED = '#'  -- the field of `rc:O` that says its counts are complete

-- A data key lives at least `keep` more seconds (its TTL only ever extended; a key without one gets one)
local function keep_for(key, keep)
  if redis.call('EXPIRE', key, keep, 'GT') == 0 then redis.call('EXPIRE', key, keep, 'NX') end
end

-- Whether any of the owner's blocks `digests` (from `first`, to `last`) is missing (one TOUCH per 1000: EXISTS's
-- answer, and the blocks' last use updated as a GET would, so a Redis that evicts by LRU (`allkeys-lru`) sees the
-- blocks of a history read from a replica's cache as used)
local function blocks_missing(o, digests, first, last)
  first, last = first or 1, last or #digests
  for i = first, last, 1000 do
    local keys = {}
    for j = i, math.min(i + 999, last) do keys[#keys + 1] = block_key(o, digests[j]) end
    if redis.call('TOUCH', unpack(keys)) ~= #keys then return true end
  end
  return false
end

-- One reference to a block gone: the block is deleted only when complete counts say it was the last one. Counts
-- that are not complete (`rc:O` lost and written again since) or that disagree (no reference left to drop) are
-- unknown: the block stays, the counts are no longer trusted, and the recount collects what is unreferenced.
local function block_drop(o, dg)
  local rc = P .. 'rc:' .. o
  if redis.call('HEXISTS', rc, TRUSTED) == 0 then
    flag()
    return
  end
  local left = redis.call('HINCRBY', rc, dg, -1)
  if left > 0 then return end
  redis.call('HDEL', rc, dg)
  if left < 0 then
    redis.call('HDEL', rc, TRUSTED)
    flag()
    return
  end
  local key = block_key(o, dg)
  local size = redis.call('STRLEN', key)
  redis.call('DEL', key)
  charge(o, -(size + BLOCK))
end

local function drop_slots(o, lkey, from, len)
  local gone = redis.call('LRANGE', lkey, from, len - 1)
  for _, dg in ipairs(gone) do block_drop(o, dg) end
  charge(o, -SLOT * (len - from))
end

-- After `rid` left the lineage: cut it back to its longest slice still in use, or drop it when unused. Only when the
-- users set exists and `rid` really left it: a lost users set says nothing about who still uses the lineage.
local function settle(o, lid, rid)
  local lkey, ukey = P .. 'l:' .. lid, P .. 'u:' .. lid
  if redis.call('ZREM', ukey, rid) == 0 then
    flag()
    return
  end
  local len = redis.call('LLEN', lkey)
  local top = redis.call('ZREVRANGE', ukey, 0, 0, 'WITHSCORES')
  if #top == 0 then
    drop_slots(o, lkey, 0, len)
    redis.call('DEL', lkey)
    redis.call('HDEL', P .. 'g', lid)
    charge(o, -LINEAGE)
    return
  end
  local keep = tonumber(top[2])
  if keep < len then
    drop_slots(o, lkey, keep, len)
    if keep == 0 then redis.call('DEL', lkey) else redis.call('LTRIM', lkey, 0, keep - 1) end
    redis.call('HSET', P .. 'g', lid, rid)  -- response ids are never reused: a generation never seen before
  end
end

-- Whether an owner with no `rc:O` (a new one, or its counts lost) has nothing stored: then counts begun now are
-- complete. Three keys every write of the owner touches must all say so.
local function owns_nothing(o)
  return redis.call('HEXISTS', P .. 'ob', o) == 0 and redis.call('HEXISTS', P .. 'oe', o) == 0
    and redis.call('EXISTS', P .. 'lru:' .. o) == 0
end

-- Remove an entry; true when it was whole enough to be one (its hash there). Tolerates an entry missing any of its
-- pieces (its fields, its lineage, a block, its owner's rc hash). An entry whose hash Redis lost (a ghost) still
-- gives back its count, fleet's and (when `owner`, the scope it is listed under, is known) its owner's; its bytes
-- and references wait for the recount it flags. Its first write is a DEL, which Redis does not refuse at
-- maxmemory, so none after it is refused either.
local function remove(rid, owner)
  local e = P .. 'e:' .. rid
  local f = redis.call('HMGET', e, 'o', 'l', 'c', 'env')
  local o, lid = f[1], f[2]
  redis.call('DEL', e)
  local listed = redis.call('ZREM', P .. 'lru', rid) == 1
  redis.call('ZREM', P .. 'exp', rid)
  local owned = owner ~= nil and redis.call('ZREM', P .. 'lru:' .. owner, rid) == 1
  if not o then
    if listed then redis.call('HINCRBY', P .. 'n', 'entries', -1) end
    if owned and redis.call('HINCRBY', P .. 'oe', owner, -1) <= 0 then redis.call('HDEL', P .. 'oe', owner) end
    if listed or owned then flag() end
    return false
  end
  if o ~= owner then redis.call('ZREM', P .. 'lru:' .. o, rid) end
  redis.call('HINCRBY', P .. 'n', 'entries', -1)
  if redis.call('HINCRBY', P .. 'oe', o, -1) <= 0 then redis.call('HDEL', P .. 'oe', o) end
  charge(o, -(tonumber(f[3]) or 0))
  if f[4] then block_drop(o, f[4]) end
  if lid then settle(o, lid, rid) end
  local rc = P .. 'rc:' .. o
  if redis.call('HLEN', rc) == 1 and redis.call('HEXISTS', rc, TRUSTED) == 1 then  -- nothing left to count
    redis.call('DEL', rc)
  end
  return true
end

local function purge(now)
  local due = redis.call('ZRANGEBYSCORE', P .. 'exp', '-inf', now, 'LIMIT', 0, 64)
  for _, rid in ipairs(due) do
    remove(rid, nil)
    redis.call('HINCRBY', P .. 'n', 'expirations', 1)
  end
end

-- Best-effort in a read: under maxmemory and noeviction Redis refuses the HINCRBY; the read still answers.
local function touch(o, rid)
  local seq = redis.pcall('HINCRBY', P .. 'n', 'seq', 1)
  if type(seq) ~= 'number' then return end
  redis.call('ZADD', P .. 'lru', seq, rid)
  redis.call('ZADD', P .. 'lru:' .. o, seq, rid)
end

-- The entry's fields when `o` may see it, else nil (an expired one found here is dropped now); nil and 'entry'
-- when it is the owner's but its hash or one of its fields is gone (the owner's LRU still lists it).
local function find(o, rid, now)
  local f = redis.call('HMGET', P .. 'e:' .. rid, 'o', 'x', 'l', 'ie', 'oe', 'own', 'env')
  if not f[1] then
    if redis.call('ZSCORE', P .. 'lru:' .. o, rid) then return nil, 'entry' end
    return nil
  end
  if f[1] ~= o then return nil end
  for i = 2, 7 do
    if not f[i] then return nil, 'entry' end
  end
  if tonumber(f[2]) <= now then
    remove(rid, o)
    redis.call('HINCRBY', P .. 'n', 'expirations', 1)
    return nil
  end
  return f
end

-- The kind of key a whole entry misses besides its own ('lineage', 'block', 'envelope'), or nil
local function broken(o, f)
  local lkey, oe = P .. 'l:' .. f[3], tonumber(f[5])
  if redis.call('LLEN', lkey) < oe then return 'lineage' end
  if oe > 0 and blocks_missing(o, redis.call('LRANGE', lkey, 0, oe - 1)) then return 'block' end
  if redis.call('EXISTS', block_key(o, f[7])) == 0 then return 'envelope' end
  return nil
end

local function figures()
  local n = redis.call('HMGET', P .. 'n', 'entries', 'bytes')
  return {tonumber(n[1]) or 0, tonumber(n[2]) or 0}
end

-- Best-effort in a read: its first write is a DEL (never refused), but a read answers even if one fails
local function purge_softly(now)
  pcall(purge, now)
end

local function read_blocks(o, digests)
  local out, keys = {}, {}
  for i, dg in ipairs(digests) do
    keys[#keys + 1] = block_key(o, dg)
    if #keys == 1000 or i == #digests then
      local got = redis.call('MGET', unpack(keys))
      for _, data in ipairs(got) do out[#out + 1] = data end
      keys = {}
    end
  end
  return out
end
"""

READ = COMMON + r"""
-- ARGV: P BLOCK SLOT LINEAGE | owner rid now mode(history|hinted|response|input) [held ...]
-- {0}: not found; {2, kind}: stored but a key of kind `kind` is gone (the entry is removed now); {1, ...}: whole.
-- What the caller's replica holds (its block cache, `store/block_cache.py`) is left out of the answer:
--   hinted   held = lineage hints, (lineage id, generation, slots) triples: when the entry's lineage is one of them
--            at the same generation (a lineage is only ever appended to between cut-backs, which bump it), the
--            first `slots` blocks' bytes are not sent; the answer's last field says how many were left out. When
--            none is the entry's lineage at its generation, no block's bytes are sent (-1): the caller looks the digests up in its
--            cache and asks again, naming the ones it holds, only if it lacks some
--   history  held = digests: the bytes of those blocks are not sent
-- Every block the slice needs is checked either way, held or not: a block Redis lost is a lost entry, never a
-- history completed from a replica's copy.
local o, rid, now, mode = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8]
-- the entry is broken: removed now, and the bookkeeping that counted its keys is recounted soon
local function lose(kind)
  remove(rid, o)
  flag()
  return {2, kind}
end
purge_softly(now)
local f, lost = find(o, rid, now)
if lost then return lose(lost) end
if not f then return {0} end
local lid, ie, oe = f[3], tonumber(f[4]), tonumber(f[5])
local lkey = P .. 'l:' .. lid
if redis.call('LLEN', lkey) < oe then
  return lose('lineage')
end
local gen = redis.call('HGET', P .. 'g', lid) or ''
local from, to = 0, oe
if mode == 'response' then from = ie elseif mode == 'input' then to = ie end
local digests = {}
if to > from then digests = redis.call('LRANGE', lkey, from, to - 1) end
local wanted, skipped = digests, 0
if mode == 'hinted' then
  skipped = -1
  for i = 9, #ARGV - 2, 3 do
    if ARGV[i] == lid and ARGV[i + 1] == gen then skipped = math.min(tonumber(ARGV[i + 2]), #digests) end
  end
  if skipped == -1 then
    if blocks_missing(o, digests) then
      return lose('block')
    end
    wanted = {}
  elseif skipped > 0 then
    if blocks_missing(o, digests, 1, skipped) then
      return lose('block')
    end
    wanted = {}
    for i = skipped + 1, #digests do wanted[#wanted + 1] = digests[i] end
  end
elseif #ARGV > 8 then
  local held, checked = {}, {}
  for i = 9, #ARGV do held[ARGV[i]] = true end
  wanted = {}
  for _, dg in ipairs(digests) do
    if held[dg] then checked[#checked + 1] = dg else wanted[#wanted + 1] = dg end
  end
  skipped = #checked
  if blocks_missing(o, checked) then
    return lose('block')
  end
end
local blocks = read_blocks(o, wanted)
for i = 1, #wanted do
  if not blocks[i] then
    return lose('block')
  end
end
local env
local ekey = block_key(o, f[7])
if mode == 'response' then
  env = redis.call('GET', ekey)
elseif mode == 'history' or mode == 'hinted' then
  env = redis.call('STRLEN', ekey)  -- its size: what the memory store reserves too
  if env == 0 then env = false end
else
  env = redis.call('EXISTS', ekey) == 1 and ''
end
if not env then
  return lose('envelope')
end
touch(o, rid)
-- the digests as one string (each is DIGEST_BYTES * 2 hex characters): one reply object, not one per block
return {1, lid, ie, oe, gen, f[6], env, table.concat(digests), blocks, skipped}
"""

PUT = COMMON + r"""
-- ARGV: P BLOCK SLOT LINEAGE | owner rid now expires own env_digest env_data base_lid base_end base_gen
--       n_input entries bytes owner_entries owner_bytes entry_overhead new_lid keep renew | digest data ... (input,
--       then output). new_lid: a random id for a new lineage; keep: the seconds its data keys live at least (the
--       expiry's TTL and a margin); renew: a lineage with less TTL left than this has its blocks' TTLs extended.
-- Written for few commands (each costs Redis CPU, and the request waits for the script): the references in one
-- HMGET and one HSET, the lineage in one RPUSH, every charge summed and applied once, the bounds checked on what
-- those increments return, and the TTLs of a long history's blocks extended only when its lineage's runs short.
local o, rid, now, expires = ARGV[5], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local own, env_dg, env_data = ARGV[9], ARGV[10], ARGV[11]
local base_lid, base_end, base_gen = ARGV[12], tonumber(ARGV[13]), ARGV[14]
local n_input = tonumber(ARGV[15])
local max_entries, max_bytes = tonumber(ARGV[16]), tonumber(ARGV[17])
local owner_entries, owner_bytes, ENTRY = tonumber(ARGV[18]), tonumber(ARGV[19]), tonumber(ARGV[20])
local new_lid, keep, renew = ARGV[21], tonumber(ARGV[22]), tonumber(ARGV[23])
local FIRST = 24
purge(now)
if redis.call('EXISTS', P .. 'e:' .. rid) == 1 then return {'exists'} end
local rc = P .. 'rc:' .. o
if redis.call('EXISTS', rc) == 0 then  -- counts begun now are complete only for an owner that had nothing
  if owns_nothing(o) then redis.call('HSET', rc, TRUSTED, 1) else flag() end
end
local owed = 0  -- bytes charged to the owner and the fleet, applied once below

-- the continued lineage: extended when this response continues its last slot, else its first slots copied. Either
-- only at the generation the continuation read (so those slots are the ones it read: a lineage is only appended to
-- between cut-backs) and with every block there: else the caller writes the history again
local lid, start, base = nil, 0, {}
if base_lid ~= '' then
  local lkey = P .. 'l:' .. base_lid
  local gen, len = redis.call('HGET', P .. 'g', base_lid), redis.call('LLEN', lkey)
  if not gen or gen ~= base_gen or len < base_end then return {'stale'} end
  if base_end > 0 then
    base = redis.call('LRANGE', lkey, 0, base_end - 1)
    if blocks_missing(o, base) then return {'stale'} end
  end
  if len == base_end then lid, start = base_lid, base_end end
end
local joined = true  -- whether the lineage's users set can take this response: it exists, or the lineage is new
if lid then
  joined = redis.call('EXISTS', P .. 'u:' .. lid) == 1
  if not joined then flag() end  -- lost: a set begun now would miss the other users
else
  lid = new_lid
  local k = 0
  while redis.call('EXISTS', P .. 'l:' .. lid, P .. 'u:' .. lid) > 0 do  -- random ids: never in practice
    k = k + 1
    lid = new_lid .. '.' .. k
  end
  redis.call('HSET', P .. 'g', lid, 0)
  owed = owed + LINEAGE
  for i = 1, #base, 1000 do
    local chunk = {}
    for j = i, math.min(i + 999, #base) do
      chunk[#chunk + 1] = base[j]
      redis.call('HINCRBY', rc, base[j], 1)
    end
    redis.call('RPUSH', P .. 'l:' .. lid, unpack(chunk))
  end
  owed = owed + SLOT * #base
  start = #base
end

-- the new blocks and the envelope: a reference each; a block's bytes written when it is new, and written again
-- when counted but gone (evicted, deleted by hand)
local digests, data = {}, {}
for i = FIRST, #ARGV, 2 do
  digests[#digests + 1] = ARGV[i]
  data[#data + 1] = ARGV[i + 1]
end
local n_blocks = #digests
digests[n_blocks + 1], data[n_blocks + 1] = env_dg, env_data
local counts = {}
for i = 1, #digests, 1000 do
  local chunk = {}
  for j = i, math.min(i + 999, #digests) do chunk[#chunk + 1] = digests[j] end
  local got = redis.call('HMGET', rc, unpack(chunk))
  for j, count in ipairs(got) do
    local dg = chunk[j]
    if counts[dg] == nil then counts[dg] = tonumber(count) or 0 end
  end
end
local refs, seen = {}, {}
for i, dg in ipairs(digests) do
  if not seen[dg] then
    local key = block_key(o, dg)
    -- the envelope, shared by every response of the owner with the same settings, carries no TTL: an eviction of it
    -- under `volatile-*` would cost them all (the refcount frees it, or the recount once its entries are gone)
    local ttl = {'EX', keep}
    if i > n_blocks then ttl = {} end
    if counts[dg] == 0 then
      redis.call('SET', key, data[i], unpack(ttl))
      owed = owed + #data[i] + BLOCK
    elseif not redis.call('SET', key, data[i], 'NX', unpack(ttl)) and i <= n_blocks then
      keep_for(key, keep)
    end
  end
  seen[dg] = true
  counts[dg] = counts[dg] + 1
end
for dg, count in pairs(counts) do
  refs[#refs + 1] = dg
  refs[#refs + 1] = count
end
for i = 1, #refs, 1000 do redis.call('HSET', rc, unpack(refs, i, math.min(i + 999, #refs))) end

local lkey = P .. 'l:' .. lid
for i = 1, n_blocks, 1000 do redis.call('RPUSH', lkey, unpack(digests, i, math.min(i + 999, n_blocks))) end
-- the data keys the entry needs live at least as long as it does. A lineage's TTL is raised only with every block
-- of it (and blocks appended get more), so it never outlives them: while it still has `renew` left, they do too
if redis.call('TTL', lkey) < renew then
  for _, dg in ipairs(base) do keep_for(block_key(o, dg), keep) end
  keep_for(lkey, keep)
end
local oe = start + n_blocks
owed = owed + SLOT * n_blocks
local cost = #own + ENTRY
owed = owed + cost
redis.call('HSET', P .. 'e:' .. rid, 'o', o, 'l', lid, 'ie', start + n_input, 'oe', oe, 'own', own,
           'env', env_dg, 'x', expires, 'c', cost)
redis.call('EXPIRE', P .. 'e:' .. rid, keep)
local n_entries = redis.call('HINCRBY', P .. 'n', 'entries', 1)
local n_bytes = redis.call('HINCRBY', P .. 'n', 'bytes', owed)
local o_entries = redis.call('HINCRBY', P .. 'oe', o, 1)
local o_bytes = redis.call('HINCRBY', P .. 'ob', o, owed)
if joined then redis.call('ZADD', P .. 'u:' .. lid, oe, rid) end
redis.call('ZADD', P .. 'exp', expires, rid)
touch(o, rid)

-- make room: the owner's quota first (its own least recently used), then the fleet's bounds. An entry Redis lost
-- (a ghost) met on the way gives back its count without counting as an eviction
local evicted, suspect = 0, false
local function evict_from(zkey, owner, counted)
  local oldest = redis.call('ZRANGE', zkey, 0, 1)
  for _, candidate in ipairs(oldest) do
    if candidate ~= rid then
      if remove(candidate, owner) then evicted = evicted + 1 end
      return true
    end
  end
  -- nothing left to evict, yet the bound is broken while other entries are counted: the index or the figures are
  -- wrong (an index lost, ghosts), and a recount makes room
  if counted() > 1 then
    suspect = true
    flag()
  end
  return false
end
local function owner_count() return tonumber(redis.call('HGET', P .. 'oe', o) or 0) end
local function fleet_count() return figures()[1] end
local function owner_over()
  if owner_entries > 0 and owner_count() > owner_entries then return true end
  return owner_bytes > 0 and tonumber(redis.call('HGET', P .. 'ob', o) or 0) > owner_bytes
end
local function fleet_over()
  local n = figures()
  return n[1] > max_entries or n[2] > max_bytes
end
local ok = true
local over = (owner_entries > 0 and o_entries > owner_entries) or (owner_bytes > 0 and o_bytes > owner_bytes)
if over then
  while ok and owner_over() do ok = evict_from(P .. 'lru:' .. o, o, owner_count) end
end
if ok and (evicted > 0 or over or n_entries > max_entries or n_bytes > max_bytes) then
  while ok and fleet_over() do ok = evict_from(P .. 'lru', nil, fleet_count) end
end
if evicted > 0 then redis.call('HINCRBY', P .. 'n', 'evictions', evicted) end
if not ok then
  remove(rid, o)
  local n = figures()
  return {'full', n[1], n[2], evicted, suspect and 1 or 0}
end
redis.call('HINCRBY', P .. 'n', 'writes', 1)
local n = figures()
-- and where the response now lies (lineage, its generation, its end): the writer's hint for the next turn
return {'ok', n[1], n[2], evicted, lid, redis.call('HGET', P .. 'g', lid) or '', oe}
"""

DELETE = COMMON + r"""
-- ARGV: P BLOCK SLOT LINEAGE | owner rid now
-- {found (0, 1, or 2: stored but broken, removed now), entries, bytes, the kind of key missing when 2}
local o, rid, now = ARGV[5], ARGV[6], tonumber(ARGV[7])
purge(now)
local f, lost = find(o, rid, now)
if not f and not lost then
  local n = figures()
  return {0, n[1], n[2]}
end
lost = lost or broken(o, f)
remove(rid, o)
if lost then flag() end
local n = figures()
if lost then return {2, n[1], n[2], lost} end
redis.call('HINCRBY', P .. 'n', 'deletions', 1)
return {1, n[1], n[2]}
"""

FIGURES = COMMON + r"""
-- ARGV: P BLOCK SLOT LINEAGE | now [owner]: the fleet's figures after dropping what expired (best-effort), whether
-- the figures hash exists at all, and whether bookkeeping is to be rebuilt (a script flagged it, or an index is gone)
purge_softly(tonumber(ARGV[5]))
local n = redis.call('HMGET', P .. 'n', 'entries', 'bytes', 'writes', 'evictions', 'expirations', 'deletions')
local owner = {0, 0}
if ARGV[6] then owner = {redis.call('HGET', P .. 'oe', ARGV[6]) or 0, redis.call('HGET', P .. 'ob', ARGV[6]) or 0} end
-- the fleet's indexes and figures all exist while entries are counted: one gone (a hand DEL raises no evicted_keys)
-- is bookkeeping to rebuild too
local flagged = redis.call('EXISTS', P .. 'dirty')
if (tonumber(n[1]) or 0) > 0 and redis.call('EXISTS', P .. 'lru', P .. 'exp', P .. 'g', P .. 'ob', P .. 'oe') < 5 then
  flagged = 1
end
return {n[1] or 0, n[2] or 0, n[3] or 0, n[4] or 0, n[5] or 0, n[6] or 0, owner[1], owner[2],
        redis.call('EXISTS', P .. 'n'), flagged}
"""
