// The client against the real adk-server binary (in-memory store, mock-model agents).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { AdkClient, eventText, functionCalls, functionResponse, grpc, stateDelta } from '../src/index.js';
import { startAdkServer } from './server.js';

const uid = (prefix) => `${prefix}-${randomUUID().slice(0, 10)}`;

/** Asserts that `promise` rejects with a gRPC status `code` whose details mention `text`. */
async function rejectsWith(promise, code, text) {
  await assert.rejects(promise, (err) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (text) assert.match(err.details, new RegExp(text));
    return true;
  });
}

/** Collects a run's events. */
async function collect(iterable) {
  const events = [];
  for await (const event of iterable) events.push(event);
  return events;
}

describe('AdkClient against adk-server', () => {
  let server;
  /** @type {AdkClient} */
  let adk;

  before(async () => {
    server = await startAdkServer();
    adk = new AdkClient(server.address);
    await adk.waitForReady();
  });

  after(async () => {
    adk?.close();
    await server?.stop();
  });

  it('creates sessions with state split by scope, temp: dropped', async () => {
    const app = uid('weather');
    const s1 = await adk.createSession(app, 'alice', {
      sessionId: 's1',
      state: { 'app:units': 'metric', 'user:name': 'Alice', 'temp:draft': true, topic: 'travel' },
    });
    assert.deepEqual([s1.appName, s1.userId, s1.id], [app, 'alice', 's1']);
    assert.deepEqual(s1.state, { 'app:units': 'metric', 'user:name': 'Alice', topic: 'travel' });
    assert.deepEqual(s1.events, []);
    assert.ok(s1.createTime instanceof Date);

    const s2 = await adk.createSession(app, 'alice', { sessionId: 's2', state: { topic: 'other' } });
    assert.deepEqual(s2.state, { 'app:units': 'metric', 'user:name': 'Alice', topic: 'other' });
    const bob = await adk.createSession(app, 'bob');
    assert.deepEqual(bob.state, { 'app:units': 'metric' });
    assert.equal(bob.id.length, 36, 'a generated UUID');

    const value = { n: 3, f: 1.5, b: false, none: null, list: [1, 'two', { three: 3 }] };
    const s3 = await adk.createSession(app, 'carol', { state: { v: value } });
    assert.deepEqual((await adk.getSession(app, 'carol', s3.id)).state.v, value);
    assert.deepEqual((await adk.listSessions(app, 'alice')).map((s) => s.id).sort(), ['s1', 's2']);

    await rejectsWith(adk.createSession(app, 'alice', { sessionId: 's1' }), grpc.status.ALREADY_EXISTS);
  });

  it('appends an event with a state delta and reads it back', async () => {
    const app = uid('weather');
    await adk.createSession(app, 'alice', { sessionId: 's1', state: { topic: 'travel' } });
    await adk.createSession(app, 'alice', { sessionId: 's2' });

    const event = await adk.appendEvent(app, 'alice', 's1', {
      text: 'Weather in Tokyo?',
      stateDelta: { 'user:city': 'Tokyo', topic: 'tokyo', 'temp:scratch': 1 },
    });
    assert.equal(event.sequence, '1'); // uint64: a string
    assert.equal(event.id.length, 36);
    assert.ok(event.timestamp);
    assert.deepEqual(stateDelta(event), { 'user:city': 'Tokyo', topic: 'tokyo' });

    const reply = await adk.appendEvent(app, 'alice', 's1', { author: 'forecaster', text: 'Sunny, 24 C' });
    assert.equal(reply.sequence, '2');
    assert.equal(reply.content.role, 'model');

    const s1 = await adk.getSession(app, 'alice', 's1');
    assert.deepEqual(s1.state, { 'user:city': 'Tokyo', topic: 'tokyo' });
    assert.deepEqual(
      s1.events.map((e) => [e.sequence, e.author, eventText(e)]),
      [['1', 'user', 'Weather in Tokyo?'], ['2', 'forecaster', 'Sunny, 24 C']],
    );
    assert.equal(s1.events[0].id, event.id);
    assert.equal(s1.eventCount, 2);
    const recent = await adk.getSession(app, 'alice', 's1', { numRecentEvents: 1 });
    assert.deepEqual(recent.events.map(eventText), ['Sunny, 24 C']);
    assert.deepEqual((await adk.getSession(app, 'alice', 's2')).state, { 'user:city': 'Tokyo' });

    await rejectsWith(adk.getSession(app, 'alice', 'missing'), grpc.status.NOT_FOUND);
  });

  it('saves and loads artifact versions; user: artifacts are shared by sessions', async () => {
    const app = uid('docs');
    assert.equal(await adk.saveArtifact(app, 'alice', 's1', 'report.txt', 'Sunny, 24 C'), 1);
    assert.equal(
      await adk.saveArtifact(app, 'alice', 's1', 'report.txt', 'Rain later, 19 C', undefined, {
        customMetadata: { source: 'forecast' },
      }),
      2,
    );
    assert.deepEqual(await adk.listVersions(app, 'alice', 's1', 'report.txt'), [2, 1]);

    const v1 = await adk.loadArtifact(app, 'alice', 's1', 'report.txt', { version: 1 });
    assert.deepEqual([v1.version, v1.data, v1.mimeType, v1.isText], [1, 'Sunny, 24 C', 'text/plain', true]);
    const latest = await adk.loadArtifact(app, 'alice', 's1', 'report.txt');
    assert.deepEqual([latest.version, latest.data, latest.sizeBytes], [2, 'Rain later, 19 C', 16]);
    assert.deepEqual(latest.customMetadata, { source: 'forecast' });

    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff]);
    assert.equal(await adk.saveArtifact(app, 'alice', 's1', 'user:avatar.png', png, 'image/png'), 1);
    const avatar = await adk.loadArtifact(app, 'alice', 's2', 'user:avatar.png');
    assert.ok(Buffer.isBuffer(avatar.data));
    assert.deepEqual([avatar.data.equals(png), avatar.mimeType, avatar.isText], [true, 'image/png', false]);
    assert.deepEqual(await adk.listArtifacts(app, 'alice', 's2'), ['user:avatar.png']);
    assert.deepEqual(await adk.listArtifacts(app, 'alice', 's1'), ['report.txt', 'user:avatar.png']);

    await rejectsWith(adk.loadArtifact(app, 'alice', 's2', 'report.txt'), grpc.status.NOT_FOUND);
    await rejectsWith(adk.loadArtifact(app, 'bob', 's1', 'report.txt'), grpc.status.NOT_FOUND);
    await rejectsWith(
      adk.saveArtifact(app, 'alice', 's1', 'report.txt', 'again', undefined, { version: 1 }),
      grpc.status.ALREADY_EXISTS,
    );
  });

  it('streams a run: partial events, then the stored reply with output_key state', async () => {
    const user = uid('alice');
    const [userEvent, ...events] = await collect(
      adk.run('assistant', user, 'chat1', 'Hello, agent!', {
        streaming: true,
        createSession: true,
        stateDelta: { 'user:name': 'Alice' },
      }),
    );
    assert.deepEqual(
      [userEvent.author, userEvent.sequence, eventText(userEvent)],
      ['user', '1', 'Hello, agent!'],
      'the stored user message comes first',
    );
    assert.ok(events.every((e) => e.invocation_id === userEvent.invocation_id));
    const partial = events.filter((e) => e.partial);
    assert.ok(partial.length >= 2, 'SSE mode streams the reply in chunks');
    assert.deepEqual(events.slice(0, partial.length), partial, 'partial events come first');
    assert.ok(partial.every((e) => e.sequence === '0'), 'partial events are not stored');
    assert.equal(partial.map(eventText).join(''), 'You said: Hello, agent!');
    const final = events.at(-1);
    // `partial` is optional: unset on complete events, which is not partial.
    assert.equal(Boolean(final.partial), false);
    assert.equal(final.author, 'assistant');
    assert.equal(eventText(final), 'You said: Hello, agent!');
    assert.deepEqual(stateDelta(final), { last_reply: 'You said: Hello, agent!' });
    assert.equal(final.sequence, '2');

    const session = await adk.getSession('assistant', user, 'chat1');
    assert.deepEqual(
      session.events.map((e) => [e.sequence, e.author, Boolean(e.partial), eventText(e)]),
      [
        ['1', 'user', false, 'Hello, agent!'],
        ['2', 'assistant', false, 'You said: Hello, agent!'],
      ],
    );
    assert.equal(session.events[1].id, final.id);
    assert.equal(session.state.last_reply, 'You said: Hello, agent!');
    assert.equal(session.state['user:name'], 'Alice');

    const plain = await collect(adk.run('assistant', user, 'chat1', 'Again'));
    assert.deepEqual(plain.map((e) => [e.author, Boolean(e.partial), eventText(e)]), [
      ['user', false, 'Again'],
      ['assistant', false, 'You said: Again'],
    ]);
    assert.equal((await adk.getSession('assistant', user, 'chat1')).eventCount, 4);
  });

  it('cancels a run left early, cleanly, and the session takes the next run', async () => {
    const user = uid('alice');
    let seen = 0;
    for await (const event of adk.run('assistant', user, 'c', 'first', { streaming: true, createSession: true })) {
      seen += 1;
      if (seen === 1) {
        assert.equal(event.author, 'user', 'the stored user message comes first');
        continue;
      }
      assert.equal(event.partial, true);
      break; // cancels the call
    }
    // The server frees the session once it has seen the cancellation: until then a new
    // run is ABORTED ("busy"), which a client retries.
    const deadline = Date.now() + 10000;
    let events;
    for (;;) {
      try {
        events = await collect(adk.run('assistant', user, 'c', 'second'));
        break;
      } catch (err) {
        if (err.code !== grpc.status.ABORTED || Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    assert.equal(eventText(events.at(-1)), 'You said: second');
  });

  it('pauses a run on a client tool and resumes it with a function_response', async () => {
    // trip_planner's booker plays its mock script (a call, then "Booked: ...") afresh in every session.
    const user = uid('alice');
    await adk.createSession('trip_planner', user, { sessionId: 'trip1' });
    const events = await collect(adk.run('trip_planner', user, 'trip1', 'Two nights at Hotel Sakura, please'));
    const paused = events.at(-1);
    const calls = functionCalls(paused);
    assert.deepEqual(calls, [{ name: 'confirm_booking', id: 'booking-1', args: { hotel: 'Hotel Sakura', nights: 2 } }]);
    assert.deepEqual(paused.long_running_tool_ids, ['booking-1']);

    const answer = functionResponse(calls[0].name, calls[0].id, { confirmed: true });
    const resumed = await collect(adk.run('trip_planner', user, 'trip1', answer));
    assert.equal(eventText(resumed.at(-1)), 'Booked: 2 nights at Hotel Sakura.');
    const session = await adk.getSession('trip_planner', user, 'trip1');
    assert.equal(session.state.booking, 'Booked: 2 nights at Hotel Sakura.');
  });

  it('rejects bad input with INVALID_ARGUMENT naming the field', async () => {
    const INVALID = grpc.status.INVALID_ARGUMENT;
    await rejectsWith(adk.createSession('bad\napp', 'alice'), INVALID, 'app_name');
    await rejectsWith(adk.getSession('weather', '', 's1'), INVALID, 'user_id');
    await rejectsWith(adk.appendEvent('weather', 'alice', 's1\u0000', { text: 'hi' }), INVALID, 'session_id');
    await rejectsWith(adk.saveArtifact('weather', 'alice', 's1', '../etc/passwd', 'x'), INVALID, 'file_name');
    await rejectsWith(adk.loadArtifact('weather', 'alice', 's1', '/abs'), INVALID, 'file_name');
    await rejectsWith(collect(adk.run('assistant', 'bad\tuser', 's1', 'hi')), INVALID, 'user_id');
    await rejectsWith(
      collect(adk.run('no_such_app', 'alice', 's1', 'hi', { createSession: true })),
      grpc.status.NOT_FOUND,
      'no_such_app',
    );
  });
});
