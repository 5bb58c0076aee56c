//! The Lua scripts of the Redis memory backend. Each runs atomically on the keys of one
//! user's memories, which share the user's hash tag (see `crate::redis::keys`).

/// Removes entry `mid` (encoded id) and its postings; shared by both scripts.
macro_rules! remove_entry_fn {
    () => {
        r#"
local function remove_entry(stats, vectors, entry_prefix, term_prefix, mid)
  local key = entry_prefix .. mid
  local old = redis.call('HMGET', key, 'len', 't')
  if not old[1] then return 0 end
  for term in string.gmatch(old[2] or '', '[^ ]+') do
    redis.call('HDEL', term_prefix .. term, mid)
  end
  redis.call('HINCRBY', stats, 'n', -1)
  redis.call('HINCRBY', stats, 'len', -tonumber(old[1]))
  redis.call('HINCRBY', stats, 'w', 1)
  redis.call('DEL', key)
  redis.call('HDEL', vectors, mid)
  return 1
end
"#
    };
}

/// Stores the `count` entries listed from `ARGV[at]`, each replacing the entry of its
/// id with its postings; returns where the arguments after them start.
macro_rules! store_entries_fn {
    () => {
        r#"
local function store_entries(stats, vectors, entry_prefix, term_prefix, count, at)
  for _ = 1, count do
    local mid, payload, vector = ARGV[at], ARGV[at + 1], ARGV[at + 2]
    local len, nterms = ARGV[at + 3], tonumber(ARGV[at + 4])
    at = at + 5
    remove_entry(stats, vectors, entry_prefix, term_prefix, mid)
    if vector ~= '' then redis.call('HSET', vectors, mid, vector) end
    local terms = {}
    for _ = 1, nterms do
      redis.call('HSET', term_prefix .. ARGV[at], mid, ARGV[at + 1] .. ':' .. len)
      terms[#terms + 1] = ARGV[at]
      at = at + 2
    end
    redis.call('HSET', entry_prefix .. mid, 'e', payload, 'len', len, 't', table.concat(terms, ' '))
    redis.call('HINCRBY', stats, 'n', 1)
    redis.call('HINCRBY', stats, 'len', len)
    redis.call('HINCRBY', stats, 'w', 1)
  end
  return at
end
"#
    };
}

/// Stores entries, each replacing the entry of its id with its postings.
/// KEYS and ARGV: `UpsertArgs` (`script_args.rs`).
pub(super) const UPSERT: &str = concat!(
    remove_entry_fn!(),
    store_entries_fn!(),
    r#"
local tail = 4
store_entries(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3]), tail)
return 1
"#
);

/// Applies one generation if the user's generation version is still the expected one:
/// its entries, removals, revisions and the events it read, takes the ingested events it
/// consumed out of the buffer, then raises the version.
/// KEYS and ARGV: `CommitArgs` (the counts first, then the lists). Returns 1 when applied, 0 when the version moved on.
pub(super) const COMMIT: &str = concat!(
    remove_entry_fn!(),
    store_entries_fn!(),
    r#"
local stats, vectors, generation, buffer, order = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local entry_prefix, term_prefix, revision_prefix = ARGV[1], ARGV[2], ARGV[3]
if tonumber(redis.call('HGET', generation, 'v') or '0') ~= tonumber(ARGV[4]) then return 0 end
local removals, revisions, events = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local unbuffered = tonumber(ARGV[9])
local tail = 10
local at = store_entries(stats, vectors, entry_prefix, term_prefix, tonumber(ARGV[5]), tail)
for _ = 1, removals do
  remove_entry(stats, vectors, entry_prefix, term_prefix, ARGV[at])
  at = at + 1
end
for _ = 1, revisions do
  redis.call('RPUSH', revision_prefix .. ARGV[at], ARGV[at + 1])
  at = at + 2
end
for _ = 1, events do
  redis.call('HSET', generation, 'e:' .. ARGV[at], '1')
  at = at + 1
end
for _ = 1, unbuffered do
  redis.call('HDEL', buffer, ARGV[at])
  redis.call('ZREM', order, ARGV[at])
  at = at + 1
end
redis.call('HINCRBY', generation, 'v', 1)
return 1
"#
);

/// Buffers ingested events, each unless the buffer holds it or a generation read it
/// (`e:<id>` of the generation hash), numbered in arrival order by the hash's `s`.
/// KEYS and ARGV: `BufferArgs`. Returns how many events the buffer holds.
pub(super) const BUFFER: &str = r#"
local generation, buffer, order = KEYS[1], KEYS[2], KEYS[3]
local tail = 2
local at = tail
for _ = 1, tonumber(ARGV[1]) do
  local id, payload = ARGV[at], ARGV[at + 1]
  at = at + 2
  if redis.call('HEXISTS', buffer, id) == 0 and redis.call('HEXISTS', generation, 'e:' .. id) == 0 then
    redis.call('ZADD', order, redis.call('HINCRBY', generation, 's', 1), id)
    redis.call('HSET', buffer, id, payload)
  end
end
return redis.call('ZCARD', order)
"#;

/// The first buffered events, in arrival order: their payloads. KEYS and ARGV: `ReadBufferArgs`.
pub(super) const READ_BUFFER: &str = r#"
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #ids == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(ids))
"#;

/// Claims an app's due users: up to ARGV[3] of those scored at most ARGV[1] (now), each
/// scored ARGV[2] (claimed until) instead. KEYS and ARGV: `ClaimArgs`. Returns them.
pub(super) const CLAIM: &str = r#"
local users = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, user in ipairs(users) do
  redis.call('ZADD', KEYS[1], ARGV[2], user)
end
return users
"#;

/// Ends the claim on user ARGV[1] if its score is still ARGV[2] (no ingest moved it):
/// scored ARGV[3] instead, or out of the index when that is empty. KEYS and ARGV:
/// `ReleaseArgs`. Returns 1 when the claim was still there.
pub(super) const RELEASE: &str = r#"
if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '-1') ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
end
return 1
"#;

/// Removes one entry and its postings. KEYS and ARGV: `RemoveArgs`.
/// Returns 1 if it existed.
pub(super) const DELETE: &str = concat!(
    remove_entry_fn!(),
    r#"
return remove_entry(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
"#
);
