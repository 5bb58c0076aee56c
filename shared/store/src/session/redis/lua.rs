//! The Lua scripts of the Redis backend. Each runs atomically on one node: every
//! key it touches is passed in KEYS and carries the user's hash tag `{app:user}` or
//! (the app index shard on a cluster) a tag on the same slot; only on standalone
//! Redis are the app index and app state keys, under `{app}`, passed too.
//!
//! What each script takes in KEYS and ARGV, position by position, is written once:
//! in its argument builder (`script_args.rs`, e.g. `AppendArgs`), which every call
//! site uses and whose tests check that the script reads exactly what it sends.
//! A script that takes field/value pairs after its fixed arguments starts them at
//! `local tail`.
//!
//! Writing scripts check everything that can fail before their first write, so
//! they apply all of their writes or none.

/// Shared helpers, pasted in front of the writing scripts.
macro_rules! lua_helpers {
    () => {
        r#"
-- Writes `count` field/value pairs taken from ARGV (starting at index `at`)
-- into the hash `key`; returns the index after the last pair.
local function hset_pairs(key, at, count)
  for i = 0, count - 1 do
    redis.call('HSET', key, ARGV[at + 2 * i], ARGV[at + 2 * i + 1])
  end
  return at + 2 * count
end

-- With a TTL, makes the session keys (KEYS[1..5]: meta first) expire `ttl_ms` from now by
-- Redis's own clock and records the instant in meta.expire_ms. Returns that
-- instant in Unix milliseconds, or '' without a TTL.
-- Writes the `count` app state pairs from ARGV[at…] into `key` (only passed on
-- standalone Redis) and, when there are any, tells every process that caches app
-- state (`channel`, message: the app's name).
local function write_app_state(key, at, count, channel, app)
  if not key or count == 0 then return end
  hset_pairs(key, at, count)
  redis.call('PUBLISH', channel, app)
end

local function apply_ttl(ttl_ms)
  if ttl_ms <= 0 then return '' end
  local now = redis.call('TIME')
  local at = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl_ms)
  for i = 1, 5 do redis.call('PEXPIREAT', KEYS[i], at) end
  redis.call('HSET', KEYS[1], 'expire_ms', at)
  return at
end
"#
    };
}

/// CreateSession. Guarantees: fails with `EXISTS` and writes nothing when the
/// session exists; otherwise, in one step, clears leftovers of an expired
/// session with the same id, writes meta, session state, user state, the user
/// index, the app index (shard), app state when its key is passed (and
/// publishes the change), and applies the TTL to every session key.
///
/// KEYS and ARGV: `CreateArgs`.
/// Returns `{'EXISTS', '', {}}` or `{'OK', expire_ms or '', user state as HGETALL}`.
pub(super) const CREATE: &str = concat!(
    lua_helpers!(),
    r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return {'EXISTS', '', {}} end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('HSET', KEYS[1], 'create_us', ARGV[1], 'create_ns', ARGV[2], 'update_us', ARGV[1],
  'update_ns', ARGV[2], 'seq', 0, 'last_id', '', 'ttl_ms', ARGV[3])
local tail = 11
local at = hset_pairs(KEYS[2], tail, tonumber(ARGV[6]))
at = hset_pairs(KEYS[6], at, tonumber(ARGV[7]))
write_app_state(KEYS[9], at, tonumber(ARGV[8]), ARGV[10], ARGV[9])
redis.call('ZADD', KEYS[7], ARGV[1], ARGV[4])
redis.call('ZADD', KEYS[8], ARGV[1], ARGV[5])
local expire = apply_ttl(tonumber(ARGV[3]))
return {'OK', expire, redis.call('HGETALL', KEYS[6])}
"#
);

/// AppendEvent. Guarantees, all in one step: `NOTFOUND` when the session is
/// missing; when the event id is already in the session, the stored event
/// unchanged and no write (`DUP`); `ABORTED` and no write when the precondition
/// fails (`LEASE` when the precondition names a lease holder that no longer
/// holds the session's lease); otherwise the next sequence, the event in the stream under id
/// `<seq>-1` (so order never depends on clocks), its id and timestamp indexed,
/// the state delta applied by scope (app state only when its key is passed,
/// and then published), meta, the user index and the app index (shard)
/// updated, and the TTL renewed on every session key (`NEW`). The watchers are
/// woken once the write is acknowledged: here when `AppendArgs::wake` asks for it (no
/// replica to wait for: running is acknowledging), else by the caller after the
/// replicas confirmed it (`RedisSessionBackend::wake_watchers_in_background`).
///
/// The event arrives protobuf-encoded without a sequence; the script appends
/// field 16 (`sequence`, a varint) to it. Protobuf decoders accept fields in
/// any order, so the stored bytes decode to the event with its sequence (the
/// stored-bytes contract written at `sequence` in `proto/adk/v1/event.proto`).
///
/// A compaction moves the bounded-read window: it then starts at the first event
/// stamped at or after the compacted range's end, found through the timestamp index
/// in O(events in the window).
///
/// KEYS and ARGV: `AppendArgs`.
/// Returns `{status, stored event bytes or '', sequence or 0}`, status one of NOTFOUND,
/// ABORTED, LEASE, DUP (with the stored event's bytes), NEW (with the new sequence: the
/// caller has the event, so its bytes do not travel back).
pub(super) const APPEND: &str = concat!(
    lua_helpers!(),
    r#"
-- Protobuf base-128 varint of a non-negative integer.
local function varint(n)
  local out = {}
  while n >= 128 do
    out[#out + 1] = string.char(n % 128 + 128)
    n = math.floor(n / 128)
  end
  out[#out + 1] = string.char(n)
  return table.concat(out)
end

if redis.call('EXISTS', KEYS[1]) == 0 then return {'NOTFOUND', '', 0} end
local seen = redis.call('HGET', KEYS[4], ARGV[1])
if seen then
  local entry = redis.call('XRANGE', KEYS[3], seen .. '-1', seen .. '-1')
  if #entry > 0 then
    if ARGV[16] ~= '' then redis.call('PUBLISH', ARGV[16], KEYS[3]) end
    return {'DUP', entry[1][2][2], 0}
  end
end
local meta = redis.call('HMGET', KEYS[1], 'seq', 'last_id', 'ttl_ms')
local last_seq, last_id = meta[1] or '0', meta[2] or ''
if (ARGV[2] == 'seq' and ARGV[3] ~= last_seq) or (ARGV[2] == 'id' and ARGV[3] ~= last_id) then
  return {'ABORTED', '', 0}
end
if ARGV[2] == 'lease' and redis.call('GET', KEYS[9]) ~= ARGV[3] then return {'LEASE', '', 0} end
local seq = tonumber(last_seq) + 1
-- The only write that could fail on its own (an entry id not above the last):
-- it comes first, so a failure leaves everything unchanged.
redis.call('XADD', KEYS[3], seq .. '-1', 'e', ARGV[8] .. '\128\1' .. varint(seq))
redis.call('HSET', KEYS[4], ARGV[1], seq)
redis.call('ZADD', KEYS[5], ARGV[12], seq)
local window = ARGV[15]
if window == 'reset' then
  redis.call('HSET', KEYS[1], 'window', 0)
elseif window ~= '' then
  local first = seq
  for _, s in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], window, '+inf')) do
    if tonumber(s) < first then first = tonumber(s) end
  end
  redis.call('HSET', KEYS[1], 'window', first)
end
local tail = 17
local at = hset_pairs(KEYS[2], tail, tonumber(ARGV[9]))
at = hset_pairs(KEYS[6], at, tonumber(ARGV[10]))
write_app_state(KEYS[10], at, tonumber(ARGV[11]), ARGV[14], ARGV[13])
redis.call('HSET', KEYS[1], 'seq', seq, 'update_us', ARGV[4], 'update_ns', ARGV[5], 'last_id', ARGV[1])
redis.call('ZADD', KEYS[7], ARGV[4], ARGV[6])
redis.call('ZADD', KEYS[8], ARGV[4], ARGV[7])
apply_ttl(tonumber(meta[3]) or 0)
if ARGV[16] ~= '' then redis.call('PUBLISH', ARGV[16], KEYS[3]) end
return {'NEW', '', seq}
"#
);

/// The `app:` half of a create or append on a cluster (one node: the app tag's):
/// writes the app state pairs and tells every process that caches app state.
///
/// KEYS and ARGV: `AppWriteArgs`.
pub(super) const APP_WRITE: &str = concat!(
    lua_helpers!(),
    r#"
local tail = 3
write_app_state(KEYS[1], tail, (#ARGV - tail + 1) / 2, ARGV[1], ARGV[2])
return 'OK'
"#
);

/// GetSession's reads on the user tag, as one consistent snapshot: meta,
/// session state, user state and the candidate events, oldest first. Reads only
/// the events asked for: the last N (`XREVRANGE COUNT N`), those whose
/// timestamp's microsecond is at or after `after` (through the timestamp
/// index, then one `XRANGE` per hit), or all of them when neither is given. The
/// caller applies the exact (nanosecond) filter.
///
/// For the window (a runner turn's bounded read), reads the events from the
/// window's first sequence (meta `window`, set by appends of compactions) on instead,
/// with one `XRANGE`; the caller applies N and `after` within them.
///
/// KEYS and ARGV: `ReadArgs`.
/// Returns nil when the session is missing, else `{meta, session state, user state, events}`
/// (hashes as HGETALL, each event as `{entry id, stored bytes}`).
pub(super) const READ: &str = r#"
local meta = redis.call('HGETALL', KEYS[1])
if #meta == 0 then return false end
local events = {}
local n, after = ARGV[1], ARGV[2]
if ARGV[3] == '1' then
  local from = tonumber(redis.call('HGET', KEYS[1], 'window') or '0')
  if from < 1 then from = 1 end
  for _, entry in ipairs(redis.call('XRANGE', KEYS[3], from .. '-1', '+')) do events[#events + 1] = {entry[1], entry[2][2]} end
elseif n ~= '' then
  if tonumber(n) > 0 then
    local entries = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', n)
    for i = #entries, 1, -1 do events[#events + 1] = {entries[i][1], entries[i][2][2]} end
  end
elseif after ~= '' then
  local seqs = redis.call('ZRANGEBYSCORE', KEYS[4], after, '+inf')
  table.sort(seqs, function(a, b) return tonumber(a) < tonumber(b) end)
  for _, seq in ipairs(seqs) do
    local entry = redis.call('XRANGE', KEYS[3], seq .. '-1', seq .. '-1')
    if #entry > 0 then events[#events + 1] = {entry[1][1], entry[1][2][2]} end
  end
else
  for _, entry in ipairs(redis.call('XRANGE', KEYS[3], '-', '+')) do events[#events + 1] = {entry[1], entry[2][2]} end
end
return {meta, redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[5]), events}
"#;

/// ForkSession's writes on the user tag, in one step: `NOTFOUND` when the source
/// is gone, `EXISTS` when the fork's id is taken; otherwise the source's stream
/// entries 1..=N copied as they are (their stored sequences stay right: a fork
/// copies a prefix), the fork's id and timestamp indexes, meta, session state,
/// the user index and the app index (shard), and the source's TTL. O(N).
///
/// KEYS and ARGV: `ForkArgs`.
/// Returns `{status, expire_ms or ''}`, status one of NOTFOUND, EXISTS, OK.
pub(super) const FORK: &str = r#"
local source = redis.call('HMGET', KEYS[1], 'seq', 'ttl_ms')
if not source[1] then return {'NOTFOUND', ''} end
if redis.call('EXISTS', KEYS[4]) == 1 then return {'EXISTS', ''} end
local n = tonumber(ARGV[1])
-- The source was deleted and re-created since its events were read: not the same log.
if redis.call('HGET', KEYS[3], ARGV[8]) ~= ARGV[1] then return {'NOTFOUND', ''} end
redis.call('DEL', KEYS[5], KEYS[6], KEYS[7], KEYS[8])
local entries = redis.call('XRANGE', KEYS[2], '1-1', n .. '-1')
local tail = 11
for i, entry in ipairs(entries) do
  redis.call('XADD', KEYS[6], entry[1], 'e', entry[2][2])
  redis.call('HSET', KEYS[7], ARGV[tail + 2 * i - 2], i)
  redis.call('ZADD', KEYS[8], ARGV[tail + 2 * i - 1], i)
end
redis.call('HSET', KEYS[4], 'create_us', ARGV[2], 'create_ns', ARGV[3], 'update_us', ARGV[4],
  'update_ns', ARGV[5], 'seq', n, 'last_id', ARGV[8], 'ttl_ms', source[2] or 0, 'window', ARGV[9])
local at = tail + 2 * n
for i = 0, tonumber(ARGV[10]) - 1 do
  redis.call('HSET', KEYS[5], ARGV[at + 2 * i], ARGV[at + 2 * i + 1])
end
redis.call('ZADD', KEYS[9], ARGV[4], ARGV[6])
redis.call('ZADD', KEYS[10], ARGV[4], ARGV[7])
local ttl = tonumber(source[2] or '0') or 0
if ttl <= 0 then return {'OK', ''} end
local now = redis.call('TIME')
local expire = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl)
for i = 4, 8 do redis.call('PEXPIREAT', KEYS[i], expire) end
redis.call('HSET', KEYS[4], 'expire_ms', expire)
return {'OK', expire}
"#;

/// Removes a listing index member whose session is gone (expired), unless it
/// was re-added since the listing saw it (its score changed): a session
/// re-created meanwhile keeps its entry. One key, so also atomic on a cluster.
///
/// KEYS and ARGV: `DropStaleArgs`.
pub(super) const DROP_STALE: &str = r#"
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
"#;

/// DeleteSession's writes on the user tag, in one step: the session's keys, its
/// entries in the user index and the app index (shard), and every one of its
/// session-scoped artifacts (the
/// user's `user:` names stay). So a session re-created under the same id never
/// sees its predecessor's artifacts, even if the server dies mid-call: the
/// delete happened whole or not at all. Costs one step per artifact version and
/// stored chunk of the session.
///
/// KEYS and ARGV: `DeleteArgs`.
/// Returns how many artifact names were deleted.
pub(super) const DELETE: &str = concat!(
    crate::artifact::redis::lua::artifact_delete_fns!(),
    r#"
redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[9])
redis.call('ZREM', KEYS[6], ARGV[1])
redis.call('ZREM', KEYS[8], ARGV[6])
return delete_scope(KEYS[7], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
"#
);

/// A run mark (`SessionBackend::append_run_mark`). Guarantees, in one step: `NOTFOUND`
/// when the session is missing; `LEASE` and no write when the session's lease is not
/// held by the owner named; otherwise the mark pushed onto the session's marks list as
/// `<the log's last sequence>:<event bytes>`, the list made to expire with the session
/// (meta's `expire_ms`), and nothing else written (`OK`).
///
/// KEYS and ARGV: `RunMarkArgs`.
pub(super) const RUN_MARK: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'NOTFOUND' end
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return 'LEASE' end
local meta = redis.call('HMGET', KEYS[1], 'seq', 'expire_ms')
redis.call('RPUSH', KEYS[2], (meta[1] or '0') .. ':' .. ARGV[2])
if meta[2] and meta[2] ~= '' then redis.call('PEXPIREAT', KEYS[2], meta[2]) end
return 'OK'
"#;

/// Wakes the watchers of a session in every process (`watch_hub.rs`): publishes its
/// events key. A script only so that it runs on the session's node (a plain
/// `PUBLISH` is routed by the channel's name, the same node for every append).
/// KEYS and ARGV: `WakeArgs`.
pub(super) const WAKE: &str = "return redis.call('PUBLISH', ARGV[1], KEYS[1])";
