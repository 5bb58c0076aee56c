// Compressed calls from Connect-ES: gRPC and gRPC-Web transports with `sendCompression: gzip`
// (every message compressed, compressMinBytes 0) against the real adk-server (--grpc-web on):
// every service takes them, streams included, answers above the server's threshold come back
// gzip-compressed (the transport accepts gzip by default) and read whole, and the message limit
// holds for what a request decompresses to.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { compressionGzip, createGrpcTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import { AdkClient, AdkError, Code } from '../dist/index.js';
import { AGENTS_FILE, startAdkServer } from './server.js';

/** @type {Awaited<ReturnType<typeof startAdkServer>>} */
let server;
before(async () => {
  server = await startAdkServer('adk-server', ['--agents', AGENTS_FILE, '--grpc-web']);
});
after(async () => {
  await server?.stop();
});

const WORDS = 'the quick brown fox jumps over the lazy dog; ';
/** @param {string} tag */
const longText = (tag) => `${tag}: ${WORDS.repeat(400)}`;

/** @template T @param {AsyncIterable<T>} items */
async function collect(items) {
  const all = [];
  for await (const item of items) all.push(item);
  return all;
}

/**
 * A client over `kind` that compresses every request with gzip, and the `grpc-encoding` of
 * each answer, in order.
 * @param {'grpc' | 'grpc-web'} kind
 */
function compressingClient(kind) {
  /** @type {string[]} */
  const encodings = [];
  /** @type {import('@connectrpc/connect').Interceptor} */
  const seeEncoding = (next) => async (req) => {
    const res = await next(req);
    encodings.push(res.header.get('grpc-encoding') ?? '');
    return res;
  };
  const options = {
    baseUrl: `http://${server.address}`,
    sendCompression: compressionGzip,
    compressMinBytes: 0,
    interceptors: [seeEncoding],
  };
  const transport =
    kind === 'grpc'
      ? createGrpcTransport(options)
      : createGrpcWebTransport({ ...options, httpVersion: '1.1' });
  return { adk: new AdkClient(transport, { retry: { maxAttempts: 1 } }), encodings };
}

const KINDS = /** @type {const} */ (['grpc', 'grpc-web']);

test('every_service_takes_gzip_requests_over_grpc_and_grpc_web', async () => {
  for (const kind of KINDS) {
    const { adk, encodings } = compressingClient(kind);
    const u = `zip-${randomUUID().slice(0, 8)}`;
    const notes = longText(`state over ${kind}`);
    await adk.createSession('assistant', u, { sessionId: 's', state: { notes } });
    const said = longText(`event over ${kind}`);
    await adk.appendEvent('assistant', u, 's', { text: said });
    encodings.length = 0;
    const session = await adk.getSession('assistant', u, 's');
    assert.equal(session.state.notes, notes, kind);
    assert.equal(session.events[0]?.text, said, kind);
    assert.deepEqual(encodings, ['gzip'], `${kind}: the big answer came gzip-compressed`);

    const saved = longText(`artifact over ${kind}`);
    await adk.saveArtifact('assistant', u, 's', 'notes.txt', { data: saved });
    assert.equal((await adk.loadArtifact('assistant', u, 's', 'notes.txt')).data, saved, kind);
    const memoryIds = await adk.addSessionToMemory('assistant', u, 's');
    assert.equal(memoryIds.length, 1, kind);
    assert.equal((await adk.searchMemory('assistant', u, 'quick fox')).length, 1, kind);

    const asked = longText(`run over ${kind}`);
    const events = await collect(adk.run('assistant', u, 'run', asked, { createSession: true }));
    assert.equal(events.at(-1)?.text, `You said: ${asked}`, kind);
  }
});

test('the_message_limit_holds_for_the_decompressed_size', async () => {
  // Five values of 1 MiB less a little: 5 MiB decompressed, a few KiB gzip-compressed.
  /** @type {Record<string, string>} */
  const state = {};
  for (let i = 0; i < 5; i++) state[`k${i}`] = 'x'.repeat(1024 * 1024 - 1024);
  for (const kind of KINDS) {
    const { adk } = compressingClient(kind);
    let refused;
    try {
      await adk.createSession('app', 'u', { state });
    } catch (error) {
      refused = error;
    }
    assert.ok(refused instanceof AdkError, `${kind}: refused with an AdkError, not ${refused}`);
    assert.equal(refused.code, Code.ResourceExhausted, kind);
    assert.equal(refused.reason, 'LIMIT_EXCEEDED', kind);
    assert.match(refused.rawMessage, /CreateSession request message \(gzip\) decompresses to more than/);
    assert.match(refused.rawMessage, /--max-message-bytes/);
  }
});
