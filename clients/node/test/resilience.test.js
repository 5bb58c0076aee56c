// Retries and resumption against real servers: which calls the client repeats when the server
// is unreachable (only those safe to repeat), and WatchSession carrying on across a server
// that is killed and restarted (Redis keeps the session), with nothing missed or repeated.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { AdkClient, AdkError, Code, connect, createGrpcTransport } from '../dist/index.js';
import { freePort, startAdkServer, startRedis } from './server.js';

test('only_calls_safe_to_repeat_are_retried', async () => {
  const port = await freePort(); // nothing listens there: every attempt fails UNAVAILABLE
  let attempts = 0;
  /** @type {import('@connectrpc/connect').Interceptor} */
  const count = (next) => async (request) => {
    attempts++;
    return next(request);
  };
  const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}`, interceptors: [count] });
  const adk = new AdkClient(transport, { retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 5 } });

  /** @param {() => Promise<unknown>} call */
  const attemptsOf = async (call) => {
    attempts = 0;
    await assert.rejects(call(), (/** @type {unknown} */ error) => error instanceof AdkError && error.code === Code.Unavailable);
    return attempts;
  };
  const cases = {
    'getSession (a read)': [3, () => adk.getSession('app', 'u', 's')],
    'listArtifacts (a read)': [3, () => adk.listArtifacts('app', 'u', 's')],
    'appendEvent with its event id': [3, () => adk.appendEvent('app', 'u', 's', { id: 'e1', text: 'x' })],
    'appendEvent without an id': [1, () => adk.appendEvent('app', 'u', 's', { text: 'x' })],
    'saveArtifact with an explicit version': [3, () => adk.saveArtifact('app', 'u', 's', 'f', { data: 'x', version: 1 })],
    'saveArtifact without a version': [1, () => adk.saveArtifact('app', 'u', 's', 'f', { data: 'x' })],
    'createSession': [1, () => adk.createSession('app', 'u')],
    'deleteSession': [1, () => adk.deleteSession('app', 'u', 's')],
    'run': [1, async () => { for await (const _ of adk.run('app', 'u', 's', 'hi')) { /* nothing arrives */ } }],
  };
  for (const [name, [expected, call]] of Object.entries(cases)) {
    assert.equal(await attemptsOf(/** @type {() => Promise<unknown>} */ (call)), expected, name);
  }
});

test('watch_session_resumes_from_the_last_sequence_after_a_server_restart', async () => {
  const redis = await startRedis();
  const args = ['--store-url', redis.url];
  let server = await startAdkServer('adk-server', args);
  const adk = connect(server.address, { retry: { initialDelayMs: 20, maxDelayMs: 200 } });
  const user = `u-${randomUUID().slice(0, 8)}`;
  try {
    await adk.createSession('app', user, { sessionId: 'watched' });
    await adk.appendEvent('app', user, 'watched', { text: 'e1' });

    const controller = new AbortController();
    /** @type {import('../dist/index.js').EventView[]} */
    const seen = [];
    const watch = adk.watchSession('app', user, 'watched', { afterSequence: 0, signal: controller.signal });
    const next = async () => {
      const { value, done } = await watch.next();
      assert.ok(!done && value);
      seen.push(value);
      return value;
    };
    assert.equal((await next()).text, 'e1'); // the stored log first
    await adk.appendEvent('app', user, 'watched', { text: 'e2' });
    assert.equal((await next()).text, 'e2'); // then live

    // A crash, then appends while no server is up: the watch must not miss them.
    await server.kill();
    const port = server.port;
    server = await startAdkServer('adk-server', args, { port });
    const writer = connect(server.address);
    await writer.appendEvent('app', user, 'watched', { text: 'e3' });
    await writer.appendEvent('app', user, 'watched', { text: 'e4' });
    assert.equal((await next()).text, 'e3');
    assert.equal((await next()).text, 'e4');
    controller.abort();
    assert.deepEqual(seen.map((e) => e.sequence), [1n, 2n, 3n, 4n]);
  } finally {
    await server.stop();
    await redis.stop();
  }
});
