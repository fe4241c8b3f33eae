"""The Lua scripts of background tasks on Redis: every change to a task's record or log is one script, so it is
atomic for the fleet, and every write by the replica that runs a task is fenced.

Keys (P is `--store-prefix`, O an owner scope as the response store keys it, never a credential):

    P j:ID       hash    one task's record: o (owner scope), s (state), r (the replica running it), f (fence),
                         lu (lease until, s), snap (its response as last published), hist (its input history),
                         n (the next sequence number), first (the oldest retained), eb (retained event bytes),
                         cx (1: a cancel was asked through another replica), fin (finish time, once finished),
                         rq (the validated request's JSON), hk (how many of hist's items are the pinned history
                         it continues), m and fam (the model and family it was admitted for), dl (its deadline,
                         wall clock), rs (how many times another replica took it over), rel (1: its owner
                         handed it over at shutdown), img and imgl (its images as fetched and scaled, joined,
                         and their lengths, comma-separated: `KEEP_IMAGES`)
    P js:ID      stream  its events, one entry per flush: entry `(B+1)-0` holds the numbers A..B, with fields
                         a (A), t (their types) and j (their JSONs), each list joined by newlines (a type has
                         none, and JSON as orjson writes it has no raw newline); or, with field p, the one
                         number B reserved for one reader's error; the end is `(N+1)-1` after the last number
                         N given, with field e: it takes no number, so `last` is the last event's
    P jall       zset    every record → admission time: the fleet's `JOB_ENTRIES`
    P jfin       zset    finished records → finish time: retention (`JOB_TTL_S`) and oldest-first eviction
    P jlease     zset    active records → lease expiry: where a lapsed owner is found
    P joa        hash    owner scope → active tasks: the fleet's `JOB_OWNER_ENTRIES`
    P jn         hash    fleet figures: admitted, rejections, evictions, expirations, reaped, fences, finished:STATE,
                         claimed, resumed, handed_over, ended:CODE (a task ended without an owner)

Fencing: `f` is a number taken from `jn`'s `fences` counter when a record is created and again whenever it
changes hands: another replica takes it over (`CLAIM`), fails it after its lease lapsed (`REAP`), or its owner
hands it over at shutdown (`HAND_OVER`); every write of the owner names the fence it holds, and a
record whose fence moved on, or that has finished (`fin`), refuses it. So an owner that comes back late can
neither overwrite the terminal state nor append after it.

Packing: a flush's events are one Stream entry, so Redis adds one entry per flush, not per event, and a reader
decodes one entry for them all. An entry's id is its last number's, so reading after a cursor (`XREAD` from
`(cursor+1)-0`) returns the entry that holds the number after it, even when that entry began before it.
Trimming moves `first` event by event, as the memory log drops them; an entry leaves the stream once every
number in it is below `first`, and readers treat what an entry still holds below `first` as dropped.

Numbering: the log numbers events as it appends them. The owner sends each event's JSON without its
`sequence_number`; the script writes `{"sequence_number":N,` in front of the rest. So a number reserved for
one reader's "you fell behind" error (`RESERVE`, on whichever replica the reader is) can never be given to
another event.
"""

COMMON = r"""
local P = ARGV[1]
local function rec(id) return P .. 'j:' .. id end
local function log(id) return P .. 'js:' .. id end
local function sid(seq) return (seq + 1) .. '-0' end
local function seq_of(entry_id) return tonumber(string.match(entry_id, '^(%d+)-')) - 1 end
local function after(entry_id)
  local ms, part = string.match(entry_id, '^(%d+)-(%d+)$')
  return ms .. '-' .. (tonumber(part) + 1)
end
local function active(state) return state == 'queued' or state == 'in_progress' end

local function drop(id)
  redis.call('DEL', rec(id), log(id))
  redis.call('ZREM', P .. 'jall', id)
  redis.call('ZREM', P .. 'jfin', id)
end

local function purge(now, ttl)
  local due = redis.call('ZRANGEBYSCORE', P .. 'jfin', '-inf', now - ttl, 'LIMIT', 0, 64)
  for _, id in ipairs(due) do
    drop(id)
    redis.call('HINCRBY', P .. 'jn', 'expirations', 1)
  end
end

-- The JSON sizes of the numbers an entry holds, oldest first: a placeholder's one number has none.
local function sizes(fields)
  local j = nil
  for i = 1, #fields, 2 do
    if fields[i] == 'j' then j = fields[i + 1] end
  end
  if not j then return {0} end
  local out, pos = {}, 1
  while true do
    local nl = string.find(j, '\n', pos, true)
    if not nl then
      out[#out + 1] = #j - pos + 1
      return out
    end
    out[#out + 1] = nl - pos
    pos = nl + 1
  end
end

-- Drop the oldest numbers while the log holds more than `maxc` of them (n - first) or `maxb` bytes of JSON:
-- `first` moves on one number at a time; an entry leaves the stream once all its numbers are below it.
-- Returns the new first and eb; the caller writes them.
local function trim(k, n, first, eb, maxc, maxb)
  local cut, done = nil, false
  local from = sid(first)
  local within = function() return n - first <= maxc and eb <= maxb end
  while not (done or within()) do
    local entries = redis.call('XRANGE', k, from, '+', 'COUNT', 1)  -- the oldest is usually the only one
    if #entries == 0 then break end
    for _, entry in ipairs(entries) do
      if within() or entry[2][1] == 'e' then
        done = true
        break
      end
      local last = seq_of(entry[1])
      local s = sizes(entry[2])
      local a = last - #s + 1
      while first <= last and not within() do
        eb = eb - s[first - a + 1]
        first = first + 1
      end
      if first > last then cut = entry[1] end
    end
    from = '(' .. entries[#entries][1]
  end
  if cut then redis.call('XTRIM', k, 'MINID', after(cut)) end
  return first, eb
end

-- Append the events ARGV[from..] (type, JSON without its sequence number), numbered from the record's `n`, as
-- one entry (none when there are no events). `raw`, when given and not empty: the model's text read before those
-- events (a JSON object, an event's offset in the entry → its pieces), kept in the entry's `r` for a replica that
-- takes the task over; readers never send it.
local function append(id, from, maxc, maxb, raw)
  if from > #ARGV then return end
  local r, k = rec(id), log(id)
  local f = redis.call('HMGET', r, 'n', 'first', 'eb')
  local n, first, eb = tonumber(f[1]), tonumber(f[2]), tonumber(f[3])
  local a = n
  local types, jsons = {}, {}
  for i = from, #ARGV, 2 do
    local json = '{"sequence_number":' .. n .. ',' .. string.sub(ARGV[i + 1], 2)
    types[#types + 1] = ARGV[i]
    jsons[#jsons + 1] = json
    eb = eb + #json
    n = n + 1
  end
  if raw and raw ~= '' then
    redis.call('XADD', k, sid(n - 1), 'a', a, 't', table.concat(types, '\n'), 'j', table.concat(jsons, '\n'),
               'r', raw)
  else
    redis.call('XADD', k, sid(n - 1), 'a', a, 't', table.concat(types, '\n'), 'j', table.concat(jsons, '\n'))
  end
  first, eb = trim(k, n, first, eb, maxc, maxb)
  redis.call('HSET', r, 'n', n, 'first', first, 'eb', eb)
end

-- The record finishes in `state`: its log ends, its lease and active count go, its retention starts.
local function finish(id, state, now)
  local r = rec(id)
  local o = redis.call('HGET', r, 'o')
  local n = tonumber(redis.call('HGET', r, 'n'))
  redis.call('XADD', log(id), n .. '-1', 'e', '1')
  redis.call('HSET', r, 's', state, 'fin', now)
  redis.call('ZREM', P .. 'jlease', id)
  if redis.call('HINCRBY', P .. 'joa', o, -1) <= 0 then redis.call('HDEL', P .. 'joa', o) end
  redis.call('ZADD', P .. 'jfin', now, id)
  redis.call('HINCRBY', P .. 'jn', 'finished:' .. state, 1)
end

-- {records, active, [name, value]...}: the fleet's figures
local function figures()
  return {redis.call('ZCARD', P .. 'jall'), redis.call('ZCARD', P .. 'jlease'), redis.call('HGETALL', P .. 'jn')}
end

-- 'ok', 'gone' (no record) or 'fenced' (another fence, or finished) for a write holding `fence`.
local function check_fence(id, fence)
  local f = redis.call('HMGET', rec(id), 'f', 'fin')
  if not f[1] then return 'gone' end
  if tonumber(f[1]) ~= fence or f[2] then return 'fenced' end
  return 'ok'
end
"""

ADMIT = COMMON + r"""
-- ARGV: P now ttl job_entries owner_entries maxc maxb id owner replica lease_until hist snap rq hk m fam dl
--       [type json]...
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local job_entries, owner_entries = tonumber(ARGV[4]), tonumber(ARGV[5])
local maxc, maxb = tonumber(ARGV[6]), tonumber(ARGV[7])
local id, o, replica, lease_until = ARGV[8], ARGV[9], ARGV[10], tonumber(ARGV[11])
purge(now, ttl)
if redis.call('EXISTS', rec(id)) == 1 then return {'exists'} end
if tonumber(redis.call('HGET', P .. 'joa', o) or '0') >= owner_entries then
  redis.call('HINCRBY', P .. 'jn', 'rejections', 1)
  return {'owner_full'}
end
while redis.call('ZCARD', P .. 'jall') >= job_entries do
  local oldest = redis.call('ZRANGE', P .. 'jfin', 0, 0)
  if #oldest == 0 then
    redis.call('HINCRBY', P .. 'jn', 'rejections', 1)
    return {'full'}
  end
  drop(oldest[1])
  redis.call('HINCRBY', P .. 'jn', 'evictions', 1)
end
local fence = redis.call('HINCRBY', P .. 'jn', 'fences', 1)
redis.call('HSET', rec(id), 'o', o, 's', 'queued', 'r', replica, 'f', fence, 'lu', lease_until,
           'hist', ARGV[12], 'snap', ARGV[13], 'n', 0, 'first', 0, 'eb', 0, 'cx', 0,
           'rq', ARGV[14], 'hk', ARGV[15], 'm', ARGV[16], 'fam', ARGV[17], 'dl', ARGV[18], 'rs', 0)
redis.call('ZADD', P .. 'jall', now, id)
redis.call('ZADD', P .. 'jlease', lease_until, id)
redis.call('HINCRBY', P .. 'joa', o, 1)
redis.call('HINCRBY', P .. 'jn', 'admitted', 1)
append(id, 19, maxc, maxb)
return {'ok', fence}
"""

APPEND = COMMON + r"""
-- ARGV: P id fence now lease_until maxc maxb state snap close raw written [type json]...
-- The owner's write: events (with the model's text they were made from, `raw`), then (when given) its new state
-- and snapshot; `close` = 1 ends the log. Idempotent: `written` is how many events the owner had written under
-- its fence before these, and the record counts them (`w`), so the same write run again (retried after a
-- timeout when the first try had gone through) appends nothing twice, and a retried end answers 'ok'.
local id, fence, now, lease_until = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local r = rec(id)
local g = redis.call('HMGET', r, 'f', 'fin', 'w')
if not g[1] then return {'gone', 0} end
if tonumber(g[1]) ~= fence then return {'fenced', 0} end
if g[2] then  -- ended under this very fence (ending it elsewhere moves the fence): by this owner's own end
  if ARGV[10] == '1' then return {'ok', tonumber(redis.call('HGET', r, 'cx'))} end  -- which this retries
  return {'fenced', 0}
end
local written, count = tonumber(ARGV[12]), (#ARGV - 12) / 2
if count > 0 and tonumber(g[3] or '0') < written + count then  -- else an earlier try of it went through
  append(id, 13, tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[11])
  redis.call('HSET', r, 'w', written + count)
end
if ARGV[9] ~= '' then redis.call('HSET', r, 'snap', ARGV[9]) end
if ARGV[8] ~= '' then redis.call('HSET', r, 's', ARGV[8]) end
if ARGV[10] == '1' then
  finish(id, redis.call('HGET', r, 's'), now)
else
  redis.call('HSET', r, 'lu', lease_until)
  redis.call('ZADD', P .. 'jlease', lease_until, id)
end
return {'ok', tonumber(redis.call('HGET', r, 'cx'))}
"""

HEARTBEAT = COMMON + r"""
-- ARGV: P now ttl lease_until [id fence]...
-- Renew the leases this replica holds; answer each with ok, cancel (asked elsewhere), ended (finished under this
-- very fence: by this replica's own last flush, which its heartbeat may meet before the flush's answer came
-- back; ending it elsewhere moves the fence), fenced or gone; list up to 16 records whose lease lapsed; and the
-- fleet's figures (as `FIGURES`).
local now, ttl, lease_until = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
purge(now, ttl)
local answers = {}
for i = 5, #ARGV, 2 do
  local id, fence = ARGV[i], tonumber(ARGV[i + 1])
  local checked = check_fence(id, fence)
  if checked == 'fenced' and tonumber(redis.call('HGET', rec(id), 'f')) == fence then checked = 'ended' end
  if checked == 'ok' then
    redis.call('HSET', rec(id), 'lu', lease_until)
    redis.call('ZADD', P .. 'jlease', lease_until, id)
    if redis.call('HGET', rec(id), 'cx') == '1' then checked = 'cancel' end
  end
  answers[#answers + 1] = checked
end
local lapsed = redis.call('ZRANGEBYSCORE', P .. 'jlease', '-inf', now, 'LIMIT', 0, 16)
return {answers, lapsed, figures()}
"""

FIGURES = COMMON + r"""
-- ARGV: P now ttl → the fleet's figures
purge(tonumber(ARGV[2]), tonumber(ARGV[3]))
return figures()
"""

READ = COMMON + r"""
-- ARGV: P id owner now ttl with_history → nil, or {state, snap, first, next, hist}
local id, o, now, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
purge(now, ttl)
local f = redis.call('HMGET', rec(id), 'o', 's', 'snap', 'first', 'n')
if not f[1] or f[1] ~= o then return nil end
local hist = ''
if ARGV[6] == '1' then hist = redis.call('HGET', rec(id), 'hist') end
return {f[2], f[3], tonumber(f[4]), tonumber(f[5]), hist}
"""

RESERVE = COMMON + r"""
-- ARGV: P id maxc maxb → a sequence number no event has, held by a placeholder entry (-1: no record)
local id = ARGV[2]
local r = rec(id)
if redis.call('EXISTS', r) == 0 then return -1 end
local f = redis.call('HMGET', r, 'n', 'first', 'eb')
local n = tonumber(f[1])
redis.call('XADD', log(id), sid(n), 'p', '1')
local first, eb = trim(log(id), n + 1, tonumber(f[2]), tonumber(f[3]), tonumber(ARGV[3]), tonumber(ARGV[4]))
redis.call('HSET', r, 'n', n + 1, 'first', first, 'eb', eb)
return n
"""

CANCEL = COMMON + r"""
-- ARGV: P id owner → nil, or {state, replica}; an active record is marked for its owner to cancel
local id, o = ARGV[2], ARGV[3]
local f = redis.call('HMGET', rec(id), 'o', 's', 'r')
if not f[1] or f[1] ~= o then return nil end
if active(f[2]) then redis.call('HSET', rec(id), 'cx', 1) end
return {f[2], f[3]}
"""

DELETE = COMMON + r"""
-- ARGV: P id owner now ttl → 0 (no such record), 1 (deleted), or the state of an active one (kept)
local id, o = ARGV[2], ARGV[3]
purge(tonumber(ARGV[4]), tonumber(ARGV[5]))
local f = redis.call('HMGET', rec(id), 'o', 's')
if not f[1] or f[1] ~= o then return 0 end
if active(f[2]) then return f[2] end
drop(id)
return 1
"""

REAP = COMMON + r"""
-- ARGV: P id fence now maxc maxb snap state code held [type json]...
-- End a record no replica holds (its lease lapsed, or its owner handed it over) in `state` (failed, or cancelled
-- when a cancel came while it was between owners), if nothing changed since it was read (its fence, its lease);
-- `code` names why, for the fleet's figures. `held` = 1: the caller holds the fence (it claimed the record and
-- cannot go on), so the lease is not looked at.
local id, fence, now = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local f = redis.call('HMGET', rec(id), 'f', 's', 'lu', 'fin')
if not f[1] or tonumber(f[1]) ~= fence or f[4] or not active(f[2]) then return 0 end
if ARGV[10] ~= '1' and tonumber(f[3]) > now then return 0 end
redis.call('HSET', rec(id), 'f', redis.call('HINCRBY', P .. 'jn', 'fences', 1), 'snap', ARGV[7], 's', ARGV[8])
append(id, 11, tonumber(ARGV[5]), tonumber(ARGV[6]))
finish(id, ARGV[8], now)
redis.call('HINCRBY', P .. 'jn', 'reaped', 1)
redis.call('HINCRBY', P .. 'jn', 'ended:' .. ARGV[9], 1)
return 1
"""

CLAIM = COMMON + r"""
-- ARGV: P id fence now model family resume_limit claim_wait replica lease_until
-- Take over a record whose lease lapsed (or that its owner handed over), if nothing changed since it was read.
-- Answers {'changed'} (someone else acted first, or its lease is live again), {'other'} (it was admitted for
-- another model or family: left for a replica that serves them), {'end', code} (it must end instead: a cancel
-- was asked while it had no owner `response_cancelled`, past its
-- deadline `job_timeout`, taken over too often `background_resume_limit`, nobody took it within the claim wait
-- `background_owner_lost`; the caller ends it with `REAP`), or {'claimed', fence, state, rq, hist, hk, snap,
-- first, n, dl, rs, cx, owner scope, lapsed since, img, imgl}: the caller now holds it under the new fence and
-- lease. `rs` counts the owners lost while the task ran: a task its owner handed over (`rel`, a shutdown) or
-- that never started (`queued`) is taken over without counting, so a rolling deploy uses up no resume.
local id, fence, now = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local r = rec(id)
local f = redis.call('HMGET', r, 'f', 's', 'lu', 'fin', 'm', 'fam', 'rs', 'dl', 'cx', 'rel')
if not f[1] or tonumber(f[1]) ~= fence or f[4] or not active(f[2]) or tonumber(f[3]) > now then
  return {'changed'}
end
local lapsed = tonumber(f[3])
if f[9] == '1' then return {'end', 'response_cancelled'} end
if f[8] and tonumber(f[8]) <= now then return {'end', 'job_timeout'} end
if now > lapsed + tonumber(ARGV[8]) then return {'end', 'background_owner_lost'} end
if f[5] ~= ARGV[5] or f[6] ~= ARGV[6] then return {'other'} end
local rs = tonumber(f[7] or '0')
local lost = f[10] ~= '1' and f[2] == 'in_progress'
if lost then
  if rs >= tonumber(ARGV[7]) then return {'end', 'background_resume_limit'} end
  rs = rs + 1
end
local lease_until = tonumber(ARGV[10])
local new_fence = redis.call('HINCRBY', P .. 'jn', 'fences', 1)
redis.call('HSET', r, 'f', new_fence, 'r', ARGV[9], 'lu', lease_until, 'rs', rs, 'w', 0)
redis.call('HDEL', r, 'rel')
redis.call('ZADD', P .. 'jlease', lease_until, id)
redis.call('HINCRBY', P .. 'jn', 'claimed', 1)
if f[2] == 'in_progress' then redis.call('HINCRBY', P .. 'jn', 'resumed', 1) end
local g = redis.call('HMGET', r, 'rq', 'hist', 'hk', 'snap', 'first', 'n', 'dl', 'cx', 'o', 'img', 'imgl')
return {'claimed', new_fence, f[2], g[1], g[2], tonumber(g[3]), g[4], tonumber(g[5]), tonumber(g[6]), g[7],
        rs, tonumber(g[8]), g[9], tostring(lapsed), g[10] or '', g[11] or ''}
"""

KEEP_IMAGES = COMMON + r"""
-- ARGV: P id fence img imgl
-- The owner keeps the task's images as it fetched and scaled them, so a replica that takes the task over uses
-- them instead of fetching them again. 'ok', or what check_fence found.
local checked = check_fence(ARGV[2], tonumber(ARGV[3]))
if checked ~= 'ok' then return checked end
redis.call('HSET', rec(ARGV[2]), 'img', ARGV[4], 'imgl', ARGV[5])
return 'ok'
"""

HAND_OVER = COMMON + r"""
-- ARGV: P id fence now maxc maxb snap state raw [type json]...
-- The owner, shutting down, lets go of a task it holds: its last events and snapshot are written, its fence
-- moves on (so nothing of the owner's can be written after) and its lease lapses now, so another replica claims
-- it at its next heartbeat instead of a lease later. 'ok', or what check_fence found. Idempotent: the record keeps
-- the fence it was handed over from (`hf`), so the same hand-over run again (retried after a timeout when the
-- first try had gone through) answers 'ok' and changes nothing.
local id, fence, now = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local checked = check_fence(id, fence)
if checked ~= 'ok' then
  if checked == 'fenced' and redis.call('HGET', rec(id), 'hf') == ARGV[3] then return 'ok' end
  return checked
end
append(id, 10, tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[9])
local r = rec(id)
if ARGV[7] ~= '' then redis.call('HSET', r, 'snap', ARGV[7]) end
if ARGV[8] ~= '' then redis.call('HSET', r, 's', ARGV[8]) end
redis.call('HSET', r, 'f', redis.call('HINCRBY', P .. 'jn', 'fences', 1), 'lu', now, 'rel', 1, 'hf', fence)
redis.call('ZADD', P .. 'jlease', now, id)
redis.call('HINCRBY', P .. 'jn', 'handed_over', 1)
return 'ok'
"""
