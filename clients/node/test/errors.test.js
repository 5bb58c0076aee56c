// Errors a program can act on: against the real adk-server, each failure is told apart by its
// ErrorInfo reason (never by the message), with its domain, the request field at fault
// (BadRequest), a limit's name and value, and RetryInfo where a retry makes sense.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { AdkError, Code, ERROR_REASONS, connect, isReason, toAdkError } from '../dist/index.js';
import { startAdkServer, AGENTS_FILE } from './server.js';

/** @type {Awaited<ReturnType<typeof startAdkServer>>} */
let server;
/** @type {import('../dist/index.js').AdkClient} */
let adk;
before(async () => {
  // One stream per user, so the second one hits the quota.
  server = await startAdkServer('adk-server', ['--agents', AGENTS_FILE, '--max-streams-per-user', '1']);
  adk = connect(server.address, { retry: { maxAttempts: 1 } });
});
after(async () => {
  await server?.stop();
});

/**
 * @param {Promise<unknown>} promise
 * @returns {Promise<AdkError>}
 */
async function failure(promise) {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof AdkError, `an AdkError, not ${error}`);
    assert.equal(error.domain, 'adk.dev');
    return error;
  }
  assert.fail('the call succeeded');
}

test('error_reasons_are_the_values_of_the_proto_enum', () => {
  // Read from the proto source, not from the code generated from it: a stale or hand-edited
  // list fails here.
  const proto = readFileSync(new URL('../../../proto/adk/v1/errors.proto', import.meta.url), 'utf8');
  const body = proto.match(/^enum ErrorReason \{([^}]*)\}/m)?.[1];
  assert.ok(body, 'errors.proto declares enum ErrorReason');
  const values = [...body.matchAll(/^\s*([A-Z][A-Z0-9_]*) = (\d+);/gm)].map(([, name, number]) => [name, Number(number)]);
  assert.deepEqual(values[0], ['ERROR_REASON_UNSPECIFIED', 0]);
  assert.deepEqual(ERROR_REASONS, values.slice(1).map(([name]) => name));
});

test('errors_carry_their_reason_domain_and_field', async () => {
  const user = `u-${randomUUID().slice(0, 8)}`;
  await adk.createSession('app', user, { sessionId: 's' });
  const first = await adk.appendEvent('app', user, 's', { text: 'one' });

  /** @type {[string, Code, () => Promise<unknown>][]} */
  const cases = [
    ['SESSION_NOT_FOUND', Code.NotFound, () => adk.getSession('app', user, 'missing')],
    ['APP_NOT_FOUND', Code.NotFound, () => adk.getApp('no-such-app')],
    ['ARTIFACT_NOT_FOUND', Code.NotFound, () => adk.loadArtifact('app', user, 's', 'missing.txt')],
    ['SESSION_ALREADY_EXISTS', Code.AlreadyExists, () => adk.createSession('app', user, { sessionId: 's' })],
    ['PRECONDITION_FAILED', Code.Aborted, () => adk.appendEvent('app', user, 's', { text: 'two', expectLastSequence: 0 })],
    ['EVENT_NOT_FOUND', Code.NotFound, () => adk.forkSession('app', user, 's', { upToEventId: 'no-such-event' })],
  ];
  for (const [reason, code, call] of cases) {
    const error = await failure(call());
    assert.equal(error.reason, reason, `${reason}: got ${error.reason} (${error.rawMessage})`);
    assert.ok(/** @type {readonly string[]} */ (ERROR_REASONS).includes(error.reason), `${reason} is a known reason`);
    assert.equal(error.code, code, reason);
    assert.ok(isReason(error, reason));
  }
  // The refused append stored nothing.
  assert.equal((await adk.getSession('app', user, 's')).eventCount, first.sequence);

  const invalid = await failure(adk.createSession('not\tvalid', user));
  assert.equal(invalid.reason, 'INVALID_ARGUMENT');
  assert.deepEqual(invalid.fieldViolations.map((v) => v.field), ['app_name']);
  assert.equal(invalid.retryDelayMs, undefined, 'bad input is not worth retrying');
});

test('a_quota_is_limit_exceeded_with_its_name_value_and_a_retry_delay', async () => {
  const user = `u-${randomUUID().slice(0, 8)}`;
  await adk.createSession('app', user, { sessionId: 's' });
  await adk.appendEvent('app', user, 's', { text: 'one' });
  const controller = new AbortController();
  const watch = adk.watchSession('app', user, 's', { afterSequence: 0, signal: controller.signal });
  // Open: its first event arrived.
  assert.equal((await watch.next()).value?.text, 'one');
  try {
    // A second stream of the same user, on the generated client (the wrapper would retry it).
    const second = async () => {
      for await (const _ of adk.sessions.watchSession({ appName: 'app', userId: user, sessionId: 's', afterSequence: 0n })) {
        /* refused before any event */
      }
    };
    const error = await failure(second().catch((e) => Promise.reject(toAdkError(e))));
    assert.equal(error.code, Code.ResourceExhausted);
    assert.equal(error.reason, 'LIMIT_EXCEEDED');
    assert.match(error.metadata.limit ?? '', /stream/);
    assert.equal(error.metadata.value, '1');
    assert.ok((error.retryDelayMs ?? 0) > 0, 'a quota frees up: the server says when to retry');
    assert.ok(error.retryable);
  } finally {
    controller.abort();
    await watch.return(undefined);
  }
});
