//! The Lua scripts of the Redis artifact backend. Each runs atomically on one
//! node. KEYS holds the keys of one name (its scope's name set, version counter
//! and version set); the per-version keys (metadata, chunks) and an upload's
//! pending chunks are built inside the script from prefixes in ARGV, because
//! their names contain the version the script picks. They all carry the same
//! hash tag `{app:user}` as KEYS, so they live in the same cluster slot.
//!
//! Key shapes (see `redis.rs`): metadata `<meta prefix><version>:<name>`, chunk
//! `<chunk prefix><version>:<index>:<name>`, pending chunk `<pending prefix><index>`.
//!
//! Versions are formatted with `%.0f`: exact for every version up to 2^53 - 1
//! (the backend's maximum), where Lua's default number formatting would switch
//! to exponent notation.
//!
//! Writing scripts check everything that can fail before their first write, so
//! they apply all of their writes or none.

/// Commits an upload as one version. Picks the version as the core's
/// `choose_version` does, atomically with the write: the given one
/// (`EXISTS` and no write if the name has it), or one above the name's counter
/// (`FULL` when that would pass the maximum); the core service turns `EXISTS` and
/// `FULL` into its errors. Checks every pending chunk is
/// still there (`EXPIRED` and no write if one timed out); then renames the
/// pending chunks into place without their TTL, writes the metadata, raises the
/// counter, and adds the version and the name.
///
/// KEYS and ARGV: `CommitArgs` (`script_args.rs`).
/// Returns `{status, version}`, status one of OK, EXISTS, FULL, EXPIRED.
pub(super) const COMMIT: &str = r#"
local function int(n) return string.format('%.0f', n) end
local tail = 8
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local version
if ARGV[1] == '' then
  if last >= tonumber(ARGV[7]) then return {'FULL', ''} end
  version = last + 1
else
  if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return {'EXISTS', ARGV[1]} end
  version = tonumber(ARGV[1])
end
local v = int(version)
local count = tonumber(ARGV[6])
for i = 0, count - 1 do
  if redis.call('EXISTS', ARGV[5] .. i) == 0 then return {'EXPIRED', ''} end
end
for i = 0, count - 1 do
  local chunk = ARGV[4] .. v .. ':' .. i .. ':' .. ARGV[2]
  redis.call('RENAME', ARGV[5] .. i, chunk)
  -- RENAME keeps the pending key's safety TTL; a committed chunk lives until deleted.
  redis.call('PERSIST', chunk)
end
redis.call('HSET', ARGV[3] .. v .. ':' .. ARGV[2], 'chunks', ARGV[6], unpack(ARGV, tail))
if version > last then redis.call('SET', KEYS[2], v) end
redis.call('ZADD', KEYS[3], v, v)
redis.call('SADD', KEYS[1], ARGV[2])
return {'OK', v}
"#;

/// A version's metadata, and which version it is: the given one, or the
/// latest. One script, so "latest" and its metadata are one snapshot.
///
/// KEYS and ARGV: `ReadMetaArgs`.
/// Returns nil when there is no such version, else `{version, metadata as HGETALL}`.
pub(super) const READ_META: &str = r#"
local v = ARGV[1]
if v == '' then
  local latest = redis.call('ZREVRANGE', KEYS[1], 0, 0)
  if #latest == 0 then return false end
  v = latest[1]
end
local meta = redis.call('HGETALL', ARGV[2] .. v .. ':' .. ARGV[3])
if #meta == 0 then return false end
return {v, meta}
"#;

/// Lua functions that delete stored artifacts, pasted in front of the scripts that
/// do: the artifact delete below, and DeleteSession's script (`crate::redis::lua::DELETE`),
/// which deletes a session's artifacts together with the session.
macro_rules! artifact_delete_fns {
    () => {
        r#"
-- Deletes the given versions of one name: each one's chunks, its metadata and its
-- entry in the name's version set `versions_key`.
local function delete_versions(versions_key, versions, name, meta_prefix, chunk_prefix)
  for _, v in ipairs(versions) do
    local meta = meta_prefix .. v .. ':' .. name
    local count = tonumber(redis.call('HGET', meta, 'chunks') or '0')
    for i = 0, count - 1 do redis.call('UNLINK', chunk_prefix .. v .. ':' .. i .. ':' .. name) end
    redis.call('UNLINK', meta)
    redis.call('ZREM', versions_key, v)
  end
end

-- Deletes every artifact of one scope: each name's versions, version set and
-- counter, then the scope's name set (every stored name is in it). Returns how
-- many names there were.
local function delete_scope(names_key, seq_prefix, versions_prefix, meta_prefix, chunk_prefix)
  local names = redis.call('SMEMBERS', names_key)
  for _, name in ipairs(names) do
    local versions_key = versions_prefix .. name
    delete_versions(versions_key, redis.call('ZRANGE', versions_key, 0, -1), name, meta_prefix, chunk_prefix)
    redis.call('UNLINK', versions_key, seq_prefix .. name)
  end
  redis.call('UNLINK', names_key)
  return #names
end
"#
    };
}
pub(crate) use artifact_delete_fns;

/// Deletes one version (or all when none is given): every chunk, the metadata
/// and the version's entry; once the name has no version left, its counter
/// (numbering starts again at 1) and its entry in the scope's name set too.
/// A missing name or version deletes nothing.
///
/// KEYS and ARGV: `DeleteArgs`.
/// Returns how many versions were deleted.
pub(super) const DELETE: &str = concat!(
    artifact_delete_fns!(),
    r#"
local versions
if ARGV[1] == '' then
  versions = redis.call('ZRANGE', KEYS[3], 0, -1)
elseif redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  versions = {ARGV[1]}
else
  versions = {}
end
delete_versions(KEYS[3], versions, ARGV[2], ARGV[3], ARGV[4])
if redis.call('ZCARD', KEYS[3]) == 0 then
  redis.call('UNLINK', KEYS[2], KEYS[3])
  redis.call('SREM', KEYS[1], ARGV[2])
end
return #versions
"#
);
