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
  redis.call('DEL', key)
  redis.call('HDEL', vectors, mid)
  return 1
end
"#
    };
}

/// Stores entries, each replacing the entry of its id with its postings.
/// KEYS and ARGV: `UpsertArgs` (`script_args.rs`).
pub(super) const UPSERT: &str = concat!(
    remove_entry_fn!(),
    r#"
local stats, vectors, entry_prefix, term_prefix = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local tail = 4
local at = tail
for _ = 1, tonumber(ARGV[3]) do
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
end
return 1
"#
);

/// Removes one entry and its postings. KEYS and ARGV: `RemoveArgs`.
/// Returns 1 if it existed.
pub(super) const DELETE: &str = concat!(
    remove_entry_fn!(),
    r#"
return remove_entry(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
"#
);
