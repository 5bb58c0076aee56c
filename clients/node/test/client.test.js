// The client against the real adk-server (in-memory store, examples/agents.yaml): every
// service, plain JSON for state and tool data, bigint int64s, page iterators, streamed
// artifacts, runs with client tools, typed errors.
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { create } from '@bufbuild/protobuf';
import { AdkError, Code, connect, downloadFile, fromValue, isReason, uploadFile } from '../dist/index.js';
import { EventSchema } from '../dist/gen/adk/v1/event_pb.js';
import { startAdkServer } from './server.js';

/** @type {Awaited<ReturnType<typeof startAdkServer>>} */
let server;
/** @type {import('../dist/index.js').AdkClient} */
let adk;
before(async () => {
  server = await startAdkServer();
  adk = connect(server.address);
});
after(async () => {
  await server?.stop();
});

const user = () => `u-${randomUUID().slice(0, 8)}`;

/**
 * The rejection of `promise`, which must be an AdkError.
 * @param {Promise<unknown>} promise
 * @returns {Promise<AdkError>}
 */
async function failure(promise) {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof AdkError, `an AdkError, not ${error}`);
    return error;
  }
  assert.fail('the call succeeded');
}

/** @template T @param {AsyncIterable<T>} items */
async function collect(items) {
  const all = [];
  for await (const item of items) all.push(item);
  return all;
}

/** @param {number} total @param {number} chunk */
async function* noise(total, chunk) {
  for (let sent = 0; sent < total; sent += chunk) {
    const bytes = new Uint8Array(Math.min(chunk, total - sent));
    for (let i = 0; i < bytes.length; i++) bytes[i] = (sent + i) * 7919 % 251;
    yield bytes;
  }
}

describe('sessions', () => {
  test('state_and_events_are_plain_json_and_int64_are_bigints', async () => {
    const u = user();
    const nested = { n: 1.5, list: [1, 'two', null, { deep: true }], empty: {}, zero: 0, no: false, text: '' };
    const s = await adk.createSession('app', u, {
      sessionId: 's1',
      state: { 'user:name': 'Alice', 'temp:draft': true, nested },
    });
    assert.deepEqual(s.state, { 'user:name': 'Alice', nested });
    assert.equal(s.eventCount, 0n);

    const ev = await adk.appendEvent('app', u, 's1', { text: 'Hi', stateDelta: { topic: 'tokyo', count: 0 } });
    assert.equal(ev.sequence, 1n);
    assert.equal(ev.text, 'Hi');
    assert.deepEqual(ev.stateDelta, { topic: 'tokyo', count: 0 });
    const got = await adk.getSession('app', u, 's1');
    assert.deepEqual(got.state, { 'user:name': 'Alice', nested, topic: 'tokyo', count: 0 });
    assert.equal(got.eventCount, 1n);
    assert.equal(got.events[0]?.text, 'Hi');
    assert.ok(got.createTime instanceof Date);
    assert.deepEqual(await adk.getUserState('app', u), { name: 'Alice' });
  });

  test('a_value_that_is_not_json_is_refused_before_anything_is_sent', async () => {
    const u = user();
    await adk.createSession('app', u, { sessionId: 's' });
    await assert.rejects(
      adk.appendEvent('app', u, 's', { stateDelta: { bad: /** @type {any} */ (undefined) } }),
      /cannot decode|undefined|JSON/i,
    );
    assert.equal((await adk.getSession('app', u, 's')).eventCount, 0n);
  });

  test('list_sessions_and_list_events_iterate_over_every_page', async () => {
    const u = user();
    for (let i = 0; i < 5; i++) await adk.createSession('pages', u, { sessionId: `s${i}` });
    const sessions = await collect(adk.listSessions('pages', u, { pageSize: 2 }));
    assert.deepEqual(sessions.map((s) => s.id).sort(), ['s0', 's1', 's2', 's3', 's4']);

    for (let i = 1; i <= 7; i++) await adk.appendEvent('pages', u, 's0', { text: `e${i}` });
    const events = await collect(adk.listEvents('pages', u, 's0', { pageSize: 3 }));
    assert.deepEqual(events.map((e) => e.sequence), [1n, 2n, 3n, 4n, 5n, 6n, 7n]);
    const newest = await collect(adk.listEvents('pages', u, 's0', { pageSize: 3, newestFirst: true }));
    assert.deepEqual(newest.map((e) => e.text), ['e7', 'e6', 'e5', 'e4', 'e3', 'e2', 'e1']);
  });

  test('an_append_with_a_stale_precondition_is_refused_and_stores_nothing', async () => {
    const u = user();
    await adk.createSession('app', u, { sessionId: 's' });
    const first = await adk.appendEvent('app', u, 's', { text: 'one', expectLastSequence: 0 });
    await adk.appendEvent('app', u, 's', { text: 'two', expectLastEventId: first.id });
    const stale = await failure(adk.appendEvent('app', u, 's', { text: 'three', expectLastSequence: 1n }));
    assert.equal(stale.reason, 'PRECONDITION_FAILED');
    assert.equal((await adk.getSession('app', u, 's')).eventCount, 2n);
  });

  test('an append with its id is stored once, however often it is sent', async () => {
    const u = user();
    await adk.createSession('app', u, { sessionId: 's' });
    const a = await adk.appendEvent('app', u, 's', { id: 'ev-1', text: 'once' });
    assert.equal(a.id, 'ev-1');
    await adk.appendEvent('app', u, 's', { id: 'ev-1', text: 'once' }).catch(() => {});
    assert.equal((await adk.getSession('app', u, 's')).eventCount, 1n);
  });

  test('app state, fork and delete', async () => {
    const app = `app-${randomUUID().slice(0, 6)}`;
    const u = user();
    assert.deepEqual(await adk.updateAppState(app, { 'app:theme': 'dark', 'app:flags': [1, 2] }), { theme: 'dark', flags: [1, 2] });
    assert.deepEqual(await adk.getAppState(app), { theme: 'dark', flags: [1, 2] });
    await adk.createSession(app, u, { sessionId: 'src' });
    const e1 = await adk.appendEvent(app, u, 'src', { text: 'a' });
    await adk.appendEvent(app, u, 'src', { text: 'b' });
    const fork = await adk.forkSession(app, u, 'src', { upToEventId: e1.id, newSessionId: 'copy' });
    assert.equal(fork.id, 'copy');
    assert.deepEqual((await adk.getSession(app, u, 'copy')).events.map((e) => e.text), ['a']);
    await adk.deleteSession(app, u, 'src');
    const gone = await failure(adk.getSession(app, u, 'src'));
    assert.equal(gone.reason, 'SESSION_NOT_FOUND');
  });

  test('bad input is INVALID_ARGUMENT naming the field', async () => {
    const bad = await failure(adk.createSession('not\tvalid', 'alice'));
    assert.equal(bad.code, Code.InvalidArgument);
    assert.deepEqual(bad.fieldViolations.map((v) => v.field), ['app_name']);
  });
});

describe('artifacts', () => {
  test('text and bytes in one message; versions are bigints, newest first', async () => {
    const u = user();
    assert.equal(await adk.saveArtifact('app', u, 's', 'notes.txt', { data: 'v1' }), 1n);
    assert.equal(await adk.saveArtifact('app', u, 's', 'notes.txt', { data: 'v2', customMetadata: { by: 'test' } }), 2n);
    const png = Uint8Array.from([0x89, 0x50, 0x4e, 0x47]);
    await adk.saveArtifact('app', u, 's', 'user:avatar.png', { data: png, mimeType: 'image/png' });
    const latest = await adk.loadArtifact('app', u, 's', 'notes.txt');
    assert.equal(latest.data, 'v2');
    assert.equal(latest.version, 2n);
    assert.deepEqual(latest.customMetadata, { by: 'test' });
    assert.equal((await adk.loadArtifact('app', u, 's', 'notes.txt', { version: 1 })).data, 'v1');
    const avatar = await adk.loadArtifact('app', u, 's', 'user:avatar.png');
    assert.deepEqual(avatar.data, png);
    assert.equal(avatar.mimeType, 'image/png');
    assert.deepEqual(await adk.listVersions('app', u, 's', 'notes.txt'), [2n, 1n]);
    assert.deepEqual((await adk.listArtifacts('app', u, 's')).sort(), ['notes.txt', 'user:avatar.png']);
    const meta = await adk.getArtifactMetadata('app', u, 's', 'user:avatar.png');
    assert.equal(meta.sizeBytes, 4n);
    await adk.deleteArtifact('app', u, 's', 'notes.txt', { version: 1 });
    assert.deepEqual(await adk.listVersions('app', u, 's', 'notes.txt'), [2n]);
  });

  test('artifacts_larger_than_a_message_stream_up_and_down_from_iterables_and_files', async () => {
    const u = user();
    const total = 9 * 1024 * 1024; // over twice the 4 MiB message limit
    const expected = createHash('sha256');
    for await (const chunk of noise(total, 1 << 20)) expected.update(chunk);
    const digest = expected.digest('hex');

    const version = await adk.saveArtifact('app', u, 's', 'big.bin', { data: noise(total, 1 << 20), sizeBytes: total });
    assert.equal(version, 1n);
    const { metadata, chunks } = await adk.downloadArtifact('app', u, 's', 'big.bin', { chunkSize: 512 * 1024 });
    assert.equal(metadata.sizeBytes, BigInt(total));
    const got = createHash('sha256');
    let count = 0;
    for await (const chunk of chunks) {
      got.update(chunk);
      count++;
    }
    assert.equal(got.digest('hex'), digest);
    assert.ok(count >= total / (512 * 1024), `${count} chunks`);

    const dir = mkdtempSync(path.join(os.tmpdir(), 'adk-node-files-'));
    const source = path.join(dir, 'in.txt');
    writeFileSync(source, 'line\n'.repeat(100000));
    const v = await uploadFile(adk, 'app', u, 's', 'file.txt', source, { mimeType: 'text/plain' });
    const target = path.join(dir, 'out.txt');
    const meta = await downloadFile(adk, 'app', u, 's', 'file.txt', target, { version: v });
    assert.equal(meta.sizeBytes, 500000n);
    assert.deepEqual(readFileSync(target), readFileSync(source));
  });

  test('a missing artifact is NOT_FOUND', async () => {
    const missing = await failure(adk.loadArtifact('app', user(), 's', 'nope.txt'));
    assert.equal(missing.reason, 'ARTIFACT_NOT_FOUND');
  });
});

describe('runner', () => {
  test('run_streams_partial_events_then_the_complete_reply', async () => {
    const u = user();
    const events = await collect(adk.run('assistant', u, 's', 'Hello, agent!', { streaming: true, createSession: true }));
    assert.equal(events[0]?.author, 'user');
    const partial = events.filter((e) => e.partial);
    const complete = events.filter((e) => !e.partial && e.author !== 'user');
    assert.ok(partial.length > 0, 'partial chunks');
    assert.ok(partial.every((e) => e.sequence === 0n));
    assert.equal(partial.map((e) => e.text).join(''), 'You said: Hello, agent!');
    assert.equal(complete.at(-1)?.text, 'You said: Hello, agent!');
    assert.ok((complete.at(-1)?.sequence ?? 0n) > 0n);
  });

  test('run_with_tools_answers_the_client_tool_and_the_invocation_resumes', async () => {
    const u = user();
    /** @type {import('../dist/index.js').FunctionCallView[]} */
    const asked = [];
    const events = await collect(
      adk.runWithTools(
        'trip_planner',
        u,
        'trip',
        'Two nights at Hotel Sakura',
        (call) => {
          asked.push(call);
          return { confirmed: true };
        },
        { createSession: true },
      ),
    );
    assert.deepEqual(asked.map((c) => [c.name, c.args]), [['confirm_booking', { hotel: 'Hotel Sakura', nights: 2 }]]);
    assert.equal(events.filter((e) => e.text).at(-1)?.text, 'Booked: 2 nights at Hotel Sakura.');
    assert.equal(events.at(-1)?.author, 'planner', 'the sequence went on after the answer, and ended');
    const answered = events.flatMap((e) => e.functionResponses);
    assert.deepEqual(answered.map((r) => r.response), [{ confirmed: true }]);
  });

  test('listApps, getApp with JSON tool schemas, cancel', async () => {
    const apps = await adk.listApps();
    assert.ok(apps.some((a) => a.name === 'assistant'));
    const app = await adk.getApp('trip_planner');
    const booker = app.rootAgent?.subAgents.find((a) => a.name === 'booker');
    const tool = booker?.tools.find((t) => t.name === 'confirm_booking');
    assert.ok(tool?.longRunning);
    assert.equal(/** @type {any} */ (fromValue(tool?.parametersSchema)).type, 'object');
    assert.equal(await adk.cancel('assistant', user(), 'idle', 'no-such-invocation'), false);
    const missing = await failure(adk.getApp('no-such-app'));
    assert.equal(missing.reason, 'APP_NOT_FOUND');
  });

  test('leaving the loop early cancels the run; the session is then free again', async () => {
    const u = user();
    for await (const event of adk.run('assistant', u, 's', 'first', { streaming: true, createSession: true })) {
      if (event.author === 'user') break;
    }
    // The server frees the session once it has seen the cancellation: a run right after may
    // find it busy for a moment, SESSION_BUSY with the server's RetryInfo delay (a run is not
    // retried by the client: the program decides).
    for (let attempt = 1; ; attempt++) {
      try {
        const events = await collect(adk.run('assistant', u, 's', 'second'));
        assert.equal(events.at(-1)?.text, 'You said: second');
        break;
      } catch (error) {
        if (!isReason(error, 'SESSION_BUSY') || error.retryDelayMs === undefined || attempt > 10) throw error;
        await new Promise((r) => setTimeout(r, error.retryDelayMs));
      }
    }
  });
});

describe('memory', () => {
  test('add, search and delete memories', async () => {
    const u = user();
    const [id] = await adk.addMemory('app', u, [{ text: 'Alice prefers window seats', author: 'user' }]);
    assert.ok(id);
    const found = await adk.searchMemory('app', u, 'window seats');
    assert.equal(found[0]?.text, 'Alice prefers window seats');
    assert.equal(await adk.deleteMemory('app', u, id), true);
    assert.deepEqual(await adk.searchMemory('app', u, 'window seats'), []);
  });
});

describe('generated memories', () => {
  /** An OpenAI-compatible model whose every answer extracts one fact. */
  const model = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const facts = { facts: [{ fact: 'The user likes window seats', topics: ['USER_PREFERENCES'] }] };
      const reply = JSON.stringify({
        id: 'c',
        object: 'chat.completion',
        created: 0,
        model: 'fake',
        choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: JSON.stringify(facts) } }],
      });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(reply);
    });
  });
  /** @type {Awaited<ReturnType<typeof startAdkServer>>} */
  let generating;
  before(async () => {
    await new Promise((resolve) => model.listen(0, '127.0.0.1', () => resolve(undefined)));
    const { port } = /** @type {import('node:net').AddressInfo} */ (model.address());
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'adk-node-gen-')), 'generation.yaml');
    writeFileSync(file, `'*':\n  model: { provider: openai, model: fake, base_url: 'http://127.0.0.1:${port}/v1' }\n`);
    generating = await startAdkServer('adk-server', ['--memory-generation', file]);
  });
  after(async () => {
    await generating?.stop();
    model.close();
  });

  /** @param {string} id @param {string} text */
  const said = (id, text) =>
    create(EventSchema, { id, author: 'user', content: { role: 'user', parts: [{ kind: { case: 'text', value: text } }] } });

  test('ingest_buffers_once_and_a_flush_generates_facts_with_revisions', async () => {
    const client = connect(generating.address);
    const u = user();
    const buffered = await client.ingestEvents('app', u, [said('e1', 'I like window seats')], { streamId: 's1' });
    assert.deepEqual(buffered, { bufferedEvents: 1, memories: [] });
    const again = await client.ingestEvents('app', u, [said('e1', 'I like window seats')]);
    assert.equal(again.bufferedEvents, 1, 'an event is buffered once');
    const flushed = await client.ingestEvents('app', u, [], { forceFlush: true });
    assert.equal(flushed.bufferedEvents, 0);
    assert.deepEqual(flushed.memories.map((m) => [m.action, m.memory.text]), [['CREATED', 'The user likes window seats']]);
    const fact = flushed.memories[0]?.memory.fact;
    assert.deepEqual([fact?.revision, fact?.topics, fact?.sourceEventIds], [1, ['USER_PREFERENCES'], ['e1']]);
    const found = await client.searchMemory('app', u, 'window seats');
    assert.deepEqual(found.map((m) => [m.author, m.text]), [['user', 'The user likes window seats']]);
    const revisions = await client.listMemoryRevisions('app', u, found[0]?.id ?? '');
    assert.deepEqual(revisions.map((r) => [r.revision, r.action, r.fact]), [[1, 'CREATED', 'The user likes window seats']]);
    // GenerateMemories of events already generated from changes nothing.
    assert.deepEqual(await client.generateMemories('app', u, { events: [said('e1', 'I like window seats')] }), []);
    const created = await client.generateMemories('app', user(), {
      events: [said('e2', 'I like window seats')],
      topics: ['USER_PREFERENCES'],
      ttlSeconds: 60,
    });
    assert.equal(created[0]?.action, 'CREATED');
    assert.ok(created[0]?.memory.fact?.expireTime instanceof Date, "the call's ttl");
    const missing = await failure(client.listMemoryRevisions('app', u, 'nothing'));
    assert.equal(missing.code, Code.NotFound);
  });
});
