//! The Lua scripts of the Redis lease backend. Each runs atomically on the keys of one
//! session's lease, which carry the session's hash tag (see `crate::redis::keys`), so
//! on a cluster they run on the node of the session they guard.

/// Lua of every script that changes a run record: its entry in the runs index,
/// written in the same script when the index is on the session's node (standalone
/// Redis: the script is then given the index key and the session's member; on a
/// cluster it is not, and the entry is written beside the script).
/// `index_run(index, member, due)` sets the entry's due time (ms); `unindex_run` drops it.
macro_rules! runs_index_lua {
    () => {
        r"
local function index_run(index, member, due)
  if index then redis.call('ZADD', index, due, member) end
end
local function unindex_run(index, member)
  if index then redis.call('ZREM', index, member) end
end
"
    };
}

/// Lua of the scripts that record a run (ACQUIRE and ACQUIRE_IN_TURN when given one,
/// REGISTER): the rule is written once. `record_run(key, owner, invocation, options,
/// record_ttl, lease_ms)` writes the run record of `owner` with its lease's expiry (now
/// plus `lease_ms`, Redis's clock), indexes it (`runs_index_lua`: `index` and `member`
/// given) and returns that expiry in ms.
macro_rules! record_run_lua {
    () => {
        concat!(
            runs_index_lua!(),
            r"
local function record_run(key, owner, invocation, options, record_ttl, lease_ms, index, member)
  local time = redis.call('TIME')
  local expires = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + tonumber(lease_ms)
  redis.call('HSET', key, 'invocation', invocation, 'owner', owner, 'options', options, 'expires', expires)
  redis.call('PEXPIRE', key, record_ttl)
  index_run(index, member, expires)
  return expires
end
"
        )
    };
}

/// Lua of the two scripts that take the lease (ACQUIRE, ACQUIRE_IN_TURN): the rule is
/// written once. `take_lease(holder, owner, lease, holder_record, run, lease_ms,
/// holder_ttl, invocation, options, record_ttl, index, member)`, given the lease's
/// current `holder` (read by the caller), takes or extends it for `owner` and records
/// the run when `invocation` is not empty (`record_run_lua`); it returns the scripts'
/// reply (see ACQUIRE).
macro_rules! take_lease_lua {
    () => {
        concat!(
            record_run_lua!(),
            r"
local function take_lease(holder, owner, lease, holder_record, run, lease_ms, holder_ttl, invocation, options, record_ttl, index, member)
  if holder and holder ~= owner then return {0, holder, 0} end
  if not holder then
    local waiting = redis.call('HGET', run, 'owner')
    if waiting and waiting ~= owner then return {0, waiting, 0} end
  end
  redis.call('SET', lease, owner, 'PX', lease_ms)
  local interrupted = ''
  if not holder then
    local previous = redis.call('GET', holder_record)
    redis.call('SET', holder_record, owner, 'PX', holder_ttl)
    if previous and previous ~= owner then interrupted = previous end
  end
  local expires = 0
  if invocation ~= '' then expires = record_run(run, owner, invocation, options, record_ttl, lease_ms, index, member) end
  return {1, interrupted, expires}
end
"
        )
    };
}

/// Takes the lease, or extends it for the same owner; otherwise returns the holder.
/// A free lease whose holder record names another owner was never released: that
/// owner is returned as interrupted, unless its run record still waits for a replica
/// to resume it (the session is busy with it until then). Given a run (ARGV[4] not
/// empty), records it once the lease is taken: a resumable run starts in one script.
///
/// KEYS and ARGV: `AcquireArgs` (`script_args.rs`).
/// Returns `{1, interrupted owner or '', run record's expiry in ms or 0}` or `{0, holder, 0}`.
pub(super) const ACQUIRE: &str = concat!(
    take_lease_lua!(),
    r"
return take_lease(redis.call('GET', KEYS[1]), ARGV[1], KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3],
  ARGV[4], ARGV[5], ARGV[6], KEYS[4], ARGV[7])
"
);

/// ACQUIRE in turn: the owner joins the session's line (a sorted set by arrival ticket)
/// unless it is in it, and its place lapses after its patience unless it asks again;
/// lapsed places at the head are dropped; the lease is taken only when free and the
/// owner is first in line (it then leaves the line), and a run given (ARGV[5] not
/// empty) recorded as ACQUIRE records it.
///
/// KEYS and ARGV: `AcquireInTurnArgs` (`script_args.rs`).
/// Returns as ACQUIRE; `{0, holder or first in line, 0}` when it is not this owner's turn.
pub(super) const ACQUIRE_IN_TURN: &str = concat!(
    take_lease_lua!(),
    r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[1])
end
redis.call('HSET', KEYS[5], ARGV[1], now + tonumber(ARGV[4]))
for _, key in ipairs({KEYS[3], KEYS[4], KEYS[5]}) do redis.call('PEXPIRE', key, ARGV[3]) end
local first
while true do
  first = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not first or tonumber(redis.call('HGET', KEYS[5], first) or '0') >= now then break end
  redis.call('ZREM', KEYS[3], first)
  redis.call('HDEL', KEYS[5], first)
end
local holder = redis.call('GET', KEYS[1])
if first ~= ARGV[1] then return {0, holder or first, 0} end
local taken = take_lease(holder, ARGV[1], KEYS[1], KEYS[2], KEYS[6], ARGV[2], ARGV[3],
  ARGV[5], ARGV[6], ARGV[7], KEYS[7], ARGV[8])
if taken[1] == 1 then
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
end
return taken
"
);

/// Extends the lease only while the owner holds it, and the owner's run record with
/// it: `{0}` lost, `{1, expires}` held, `{2, expires}` held and cancel requested;
/// `expires` is the lease's new expiry in ms for a recorded run, else 0.
///
/// KEYS and ARGV: `RenewArgs` (`script_args.rs`).
pub(super) const RENEW: &str = concat!(
    runs_index_lua!(),
    r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, 0} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local expires = 0
if redis.call('HGET', KEYS[3], 'owner') == ARGV[1] then
  local time = redis.call('TIME')
  expires = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + tonumber(ARGV[2])
  redis.call('HSET', KEYS[3], 'expires', expires)
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  index_run(KEYS[4], ARGV[4], expires)
end
if redis.call('GET', KEYS[2]) == ARGV[1] then return {2, expires} end
return {1, expires}
"
);

/// Deletes the lease, the holder record and the cancel mark, each only while the owner
/// is named in it.
///
/// KEYS and ARGV: `ReleaseArgs` (`script_args.rs`). Returns 1 when it deleted the owner's
/// run record.
pub(super) const RELEASE: &str = concat!(
    runs_index_lua!(),
    r"
for _, key in ipairs({KEYS[1], KEYS[2], KEYS[3]}) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end
if redis.call('HGET', KEYS[4], 'owner') == ARGV[1] then
  redis.call('DEL', KEYS[4])
  unindex_run(KEYS[5], ARGV[2])
  return 1
end
return 0
"
);

/// Marks the holder's cancellation and publishes it, only while the owner (or a claim
/// of it, `<owner>@…`) holds the lease; a recorded run of the owner awaiting
/// resumption is dropped instead, so no replica resumes it.
///
/// KEYS and ARGV: `CancelArgs` (`script_args.rs`). Returns 1 (marked), 2 (dropped) or 0.
pub(super) const CANCEL: &str = concat!(
    runs_index_lua!(),
    r"
local function mine(token)
  return token == ARGV[1] or string.sub(token, 1, #ARGV[1] + 1) == ARGV[1] .. '@'
end
local holder = redis.call('GET', KEYS[1])
if holder then
  if not mine(holder) then return 0 end
  redis.call('SET', KEYS[2], holder, 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], holder)
  return 1
end
local waiting = redis.call('HGET', KEYS[3], 'owner')
if waiting and mine(waiting) then
  redis.call('DEL', KEYS[3])
  unindex_run(KEYS[4], ARGV[4])
  return 2
end
return 0
"
);

/// Records a resumable run under its owner's lease (only while the owner holds it).
///
/// KEYS and ARGV: `RegisterArgs` (`script_args.rs`). Returns the lease's expiry in ms, or 0.
pub(super) const REGISTER: &str = concat!(
    record_run_lua!(),
    r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return record_run(KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], redis.call('PTTL', KEYS[1]), KEYS[3], ARGV[5])
"
);

/// Claims a recorded run whose lease lapsed: takes the lease under
/// `<invocation>@<claim>` (its holder record too) and names the new owner in the record.
/// A run whose cancel was requested before its holder died is dropped instead.
///
/// KEYS and ARGV: `ClaimArgs` (`script_args.rs`). Returns `{1, invocation, owner,
/// options, lapsed ms, expires}`, `{0}` while the lease is held, `{-1}` when there is no
/// run to claim.
pub(super) const CLAIM: &str = concat!(
    runs_index_lua!(),
    r"
if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end
local run = redis.call('HMGET', KEYS[4], 'invocation', 'owner', 'options', 'expires')
if not run[1] then
  unindex_run(KEYS[5], ARGV[5])
  return {-1}
end
if redis.call('GET', KEYS[3]) == run[2] then
  redis.call('DEL', KEYS[4])
  unindex_run(KEYS[5], ARGV[5])
  return {-1}
end
local owner = run[1] .. '@' .. ARGV[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expires = now + tonumber(ARGV[2])
redis.call('SET', KEYS[1], owner, 'PX', ARGV[2])
redis.call('SET', KEYS[2], owner, 'PX', ARGV[3])
redis.call('HSET', KEYS[4], 'owner', owner, 'expires', expires)
redis.call('PEXPIRE', KEYS[4], ARGV[4])
index_run(KEYS[5], ARGV[5], expires)
return {1, run[1], owner, run[3], math.max(0, now - tonumber(run[4] or now)), expires}
"
);

/// Hands the owner's recorded run over: the lease is deleted and the record marked
/// lapsed now, so the next scan claims it; a run not recorded is released.
///
/// KEYS and ARGV: `HandOverArgs` (`script_args.rs`). Returns 1 when handed over, else 0.
pub(super) const HAND_OVER: &str = concat!(
    runs_index_lua!(),
    r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[4], 'owner') ~= ARGV[1] then
  for _, key in ipairs({KEYS[1], KEYS[2], KEYS[3]}) do
    if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
  end
  return 0
end
redis.call('DEL', KEYS[1])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('HSET', KEYS[4], 'expires', now)
index_run(KEYS[5], ARGV[2], 0)
return 1
"
);
