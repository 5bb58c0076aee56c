// @ts-check
// AdkClient: the ADK gRPC services (sessions, artifacts, runner) behind promise- and
// async-iterator-based calls. Protos are loaded at run time from proto/adk/v1.
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import { fromStruct, fromValue, fromValueMap, toDate, toStruct, toValue, toValueMap } from './struct.js';

/** @typedef {import('./struct.js').JsonValue} JsonValue */
/** @typedef {{[key: string]: JsonValue}} JsonObject */

/** The repository's proto/ directory (override with ADK_PROTO_DIR or the protoDir option). */
export const DEFAULT_PROTO_DIR =
  process.env.ADK_PROTO_DIR ?? fileURLToPath(new URL('../../../proto', import.meta.url));

/** How the protos are loaded: field names as in the .proto, int64 as strings, enums as names. */
export const LOADER_OPTIONS = Object.freeze({
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

const cache = new Map();

/**
 * Loads adk.v1 from the .proto files: `{SessionService, ArtifactService, AgentRunner, ...}`
 * (service client constructors and message types, as @grpc/grpc-js returns them).
 * @param {string} [protoDir]
 * @returns {any}
 */
export function loadAdkV1(protoDir = DEFAULT_PROTO_DIR) {
  if (!cache.has(protoDir)) {
    const files = ['session.proto', 'artifact.proto', 'runner.proto'].map((f) => path.join('adk', 'v1', f));
    const definition = protoLoader.loadSync(files, { ...LOADER_OPTIONS, includeDirs: [protoDir] });
    cache.set(protoDir, /** @type {any} */ (grpc.loadPackageDefinition(definition)).adk.v1);
  }
  return cache.get(protoDir);
}

/**
 * @typedef {object} Session
 * @property {string} appName
 * @property {string} userId
 * @property {string} id
 * @property {JsonObject} state merged state (app -> user -> session), keys keep their prefixes
 * @property {any[]} events adk.v1.Event objects, oldest first (snake_case fields, int64 as strings)
 * @property {number} eventCount
 * @property {Date | null} createTime
 * @property {Date | null} lastUpdateTime
 * @property {Date | null} expireTime
 */

/**
 * @typedef {object} Artifact
 * @property {string} fileName
 * @property {number} version
 * @property {string} mimeType
 * @property {Buffer | string} data a string for text parts, a Buffer otherwise
 * @property {boolean} isText
 * @property {number} sizeBytes
 * @property {JsonObject} customMetadata
 * @property {Date | null} createTime
 */

export class AdkClient {
  /**
   * `new AdkClient('localhost:50051')` talks to adk-server, which serves every service on
   * one port; with the services deployed separately give `artifactsTarget` and `runnerTarget`.
   * Failed calls reject (or throw while iterating `run`) with @grpc/grpc-js's ServiceError:
   * `err.code` (a `grpc.status` value) and `err.details`.
   * The raw clients stay available as `.sessions`, `.artifacts` and `.runner`.
   * @param {string} [target]
   * @param {object} [options]
   * @param {string} [options.artifactsTarget]
   * @param {string} [options.runnerTarget]
   * @param {number} [options.timeoutMs] deadline of each unary call (default 30000; runs have none unless given)
   * @param {grpc.ChannelCredentials} [options.credentials] default: plaintext
   * @param {grpc.ChannelOptions} [options.channelOptions]
   * @param {string} [options.protoDir]
   */
  constructor(target = 'localhost:50051', options = {}) {
    const v1 = loadAdkV1(options.protoDir);
    const creds = options.credentials ?? grpc.credentials.createInsecure();
    const channelOptions = options.channelOptions ?? {};
    this.timeoutMs = options.timeoutMs ?? 30000;
    /** @type {any} */
    this.sessions = new v1.SessionService(target, creds, channelOptions);
    /** @type {any} */
    this.artifacts = new v1.ArtifactService(options.artifactsTarget ?? target, creds, channelOptions);
    /** @type {any} */
    this.runner = new v1.AgentRunner(options.runnerTarget ?? target, creds, channelOptions);
  }

  /** Resolves once every channel is connected; rejects after `timeoutMs`. */
  async waitForReady(timeoutMs = 10000) {
    const deadline = Date.now() + timeoutMs;
    await Promise.all(
      [this.sessions, this.artifacts, this.runner].map(
        (c) => new Promise((resolve, reject) => c.waitForReady(deadline, (/** @type {any} */ err) => (err ? reject(err) : resolve(undefined)))),
      ),
    );
  }

  close() {
    for (const c of [this.sessions, this.artifacts, this.runner]) c.close();
  }

  /**
   * @param {any} client
   * @param {string} method
   * @param {object} request
   * @returns {Promise<any>}
   */
  #unary(client, method, request) {
    return new Promise((resolve, reject) => {
      client[method](request, { deadline: Date.now() + this.timeoutMs }, (/** @type {any} */ err, /** @type {any} */ reply) =>
        err ? reject(err) : resolve(reply),
      );
    });
  }

  // ---- sessions -------------------------------------------------------------------

  /**
   * Creates a session. `state` keys are split by prefix: app: and user: go to the shared
   * scopes, temp: is dropped, the rest is this session's. No `sessionId`: a UUID is generated.
   * @param {string} app
   * @param {string} user
   * @param {{state?: JsonObject, sessionId?: string, ttlSeconds?: number}} [options]
   * @returns {Promise<Session>}
   */
  async createSession(app, user, { state, sessionId, ttlSeconds } = {}) {
    /** @type {any} */
    const request = { app_name: app, user_id: user, session_id: sessionId ?? '', state: toStruct(state) };
    if (ttlSeconds !== undefined) request.ttl = { seconds: Math.trunc(ttlSeconds), nanos: Math.round((ttlSeconds % 1) * 1e9) };
    return toSession(await this.#unary(this.sessions, 'CreateSession', request));
  }

  /**
   * Reads a session: merged state and its events, oldest first (NOT_FOUND when missing).
   * @param {string} app
   * @param {string} user
   * @param {string} sessionId
   * @param {{numRecentEvents?: number}} [options]
   * @returns {Promise<Session>}
   */
  async getSession(app, user, sessionId, { numRecentEvents } = {}) {
    /** @type {any} */
    const request = { app_name: app, user_id: user, session_id: sessionId };
    if (numRecentEvents !== undefined) request.num_recent_events = numRecentEvents;
    return toSession(await this.#unary(this.sessions, 'GetSession', request));
  }

  /**
   * Every session of a user (or, with user '', of the app): merged state, no events.
   * @param {string} app
   * @param {string} [user]
   * @returns {Promise<Session[]>}
   */
  async listSessions(app, user = '') {
    const sessions = [];
    let page_token = '';
    do {
      const page = await this.#unary(this.sessions, 'ListSessions', { app_name: app, user_id: user, page_token });
      sessions.push(...page.sessions.map(toSession));
      page_token = page.next_page_token;
    } while (page_token);
    return sessions;
  }

  /** @param {string} app @param {string} user @param {string} sessionId */
  async deleteSession(app, user, sessionId) {
    await this.#unary(this.sessions, 'DeleteSession', { app_name: app, user_id: user, session_id: sessionId });
  }

  /**
   * Appends an event and resolves to it as stored (id, timestamp and sequence set). Built
   * from `author` (default "user"), `text` (role "user" for the user, "model" otherwise) and
   * `stateDelta`, or given whole as `event` (an adk.v1.Event object).
   * @param {string} app
   * @param {string} user
   * @param {string} sessionId
   * @param {{author?: string, text?: string, stateDelta?: JsonObject, event?: object}} [options]
   * @returns {Promise<any>} the adk.v1.Event
   */
  async appendEvent(app, user, sessionId, { author = 'user', text, stateDelta, event } = {}) {
    if (event && (text !== undefined || stateDelta !== undefined)) {
      throw new TypeError('appendEvent: pass either event, or text/stateDelta');
    }
    if (!event) {
      /** @type {any} */
      const built = { author, actions: { state_delta: toValueMap(stateDelta) } };
      if (text !== undefined) built.content = { role: author === 'user' ? 'user' : 'model', parts: [{ text }] };
      event = built;
    }
    return this.#unary(this.sessions, 'AppendEvent', { app_name: app, user_id: user, session_id: sessionId, event });
  }

  // ---- artifacts ------------------------------------------------------------------

  /**
   * Saves the next version (or `version`) and resolves to its number. A string is stored as
   * a text part (loaded back as a string) unless a MIME type other than text/plain is given;
   * a Buffer/Uint8Array is stored with `mimeType` (default application/octet-stream). A
   * "user:" file name is visible from every session of the user.
   * @param {string} app
   * @param {string} user
   * @param {string} sessionId
   * @param {string} fileName
   * @param {Buffer | Uint8Array | string} data
   * @param {string} [mimeType]
   * @param {{customMetadata?: JsonObject, version?: number}} [options]
   * @returns {Promise<number>}
   */
  async saveArtifact(app, user, sessionId, fileName, data, mimeType, { customMetadata, version } = {}) {
    const part =
      typeof data === 'string' && (mimeType === undefined || mimeType === 'text/plain')
        ? { text: data }
        : {
            inline_data: {
              mime_type: mimeType ?? 'application/octet-stream',
              data: typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data),
            },
          };
    /** @type {any} */
    const request = { ref: ref(app, user, sessionId, fileName), part };
    if (customMetadata) request.custom_metadata = toStruct(customMetadata);
    if (version !== undefined) request.version = version;
    const reply = await this.#unary(this.artifacts, 'SaveArtifact', request);
    return Number(reply.version);
  }

  /**
   * Loads the latest version (or `version`); NOT_FOUND when missing.
   * @param {string} app
   * @param {string} user
   * @param {string} sessionId
   * @param {string} fileName
   * @param {{version?: number}} [options]
   * @returns {Promise<Artifact>}
   */
  async loadArtifact(app, user, sessionId, fileName, { version } = {}) {
    /** @type {any} */
    const request = { ref: ref(app, user, sessionId, fileName) };
    if (version !== undefined) request.version = version;
    const reply = await this.#unary(this.artifacts, 'LoadArtifact', request);
    const meta = reply.metadata ?? {};
    const isText = reply.part.kind === 'text';
    return {
      fileName: meta.file_name,
      version: Number(reply.version),
      mimeType: meta.mime_type || (isText ? 'text/plain' : reply.part.inline_data.mime_type),
      data: isText ? reply.part.text : reply.part.inline_data.data,
      isText,
      sizeBytes: Number(meta.size_bytes ?? 0),
      customMetadata: fromStruct(meta.custom_metadata),
      createTime: toDate(meta.create_time),
    };
  }

  /**
   * File names visible from a session (its own and the user's "user:" ones), sorted.
   * @param {string} app @param {string} user @param {string} sessionId
   * @returns {Promise<string[]>}
   */
  async listArtifacts(app, user, sessionId) {
    const reply = await this.#unary(this.artifacts, 'ListArtifacts', { app_name: app, user_id: user, session_id: sessionId });
    return reply.file_names;
  }

  /**
   * An artifact's versions, newest first.
   * @param {string} app @param {string} user @param {string} sessionId @param {string} fileName
   * @returns {Promise<number[]>}
   */
  async listVersions(app, user, sessionId, fileName) {
    const reply = await this.#unary(this.artifacts, 'ListVersions', { ref: ref(app, user, sessionId, fileName) });
    return reply.versions.map(Number);
  }

  /**
   * Deletes one version, or every version.
   * @param {string} app @param {string} user @param {string} sessionId @param {string} fileName
   * @param {{version?: number}} [options]
   */
  async deleteArtifact(app, user, sessionId, fileName, { version } = {}) {
    /** @type {any} */
    const request = { ref: ref(app, user, sessionId, fileName) };
    if (version !== undefined) request.version = version;
    await this.#unary(this.artifacts, 'DeleteArtifact', request);
  }

  // ---- runner ---------------------------------------------------------------------

  /**
   * Runs the app's agent on a message and yields its events (adk.v1.Event objects) as they
   * arrive. `message` is the user's text or a whole Content (e.g. from functionResponse()).
   * With `streaming: true` (SSE) the reply comes as `partial` events first, then complete;
   * only complete events are stored. Errors are thrown while iterating; leaving the loop
   * early cancels the call, which stops the invocation.
   * @param {string} app
   * @param {string} user
   * @param {string} sessionId
   * @param {string | object} message
   * @param {{streaming?: boolean, stateDelta?: JsonObject, createSession?: boolean, maxLlmCalls?: number, timeoutMs?: number}} [options]
   * @returns {AsyncGenerator<any, void, undefined>}
   */
  async *run(app, user, sessionId, message, { streaming = false, stateDelta, createSession = false, maxLlmCalls = 0, timeoutMs } = {}) {
    const request = {
      app_name: app,
      user_id: user,
      session_id: sessionId,
      new_message: typeof message === 'string' ? { role: 'user', parts: [{ text: message }] } : message,
      state_delta: toValueMap(stateDelta),
      run_config: { streaming_mode: streaming ? 'STREAMING_MODE_SSE' : 'STREAMING_MODE_NONE', max_llm_calls: maxLlmCalls },
      create_session: createSession,
    };
    const call = this.runner.Run(request, timeoutMs === undefined ? {} : { deadline: Date.now() + timeoutMs });
    try {
      for await (const event of call) yield event;
    } finally {
      call.on('error', () => {}); // the CANCELLED status cancel() causes is expected
      call.cancel(); // a no-op once the stream has ended
    }
  }

  /** The apps the runner serves (adk.v1.App objects: name and agent tree). */
  async listApps() {
    return (await this.#unary(this.runner, 'ListApps', {})).apps;
  }
}

// ---- helpers ----------------------------------------------------------------------

/** @param {string} app @param {string} user @param {string} sessionId @param {string} fileName */
function ref(app, user, sessionId, fileName) {
  return { app_name: app, user_id: user, session_id: sessionId, file_name: fileName };
}

/** @param {any} s @returns {Session} */
function toSession(s) {
  return {
    appName: s.app_name,
    userId: s.user_id,
    id: s.id,
    state: fromStruct(s.state),
    events: s.events ?? [],
    eventCount: Number(s.event_count),
    createTime: toDate(s.create_time),
    lastUpdateTime: toDate(s.last_update_time),
    expireTime: toDate(s.expire_time),
  };
}

/**
 * The text of an event's parts, concatenated ('' when it has none).
 * @param {any} event
 * @returns {string}
 */
export function eventText(event) {
  /** @type {any[]} */
  const parts = event.content?.parts ?? [];
  return parts.filter((p) => p.kind === 'text').map((p) => p.text).join('');
}

/**
 * An event's actions.state_delta as a plain object.
 * @param {any} event
 * @returns {JsonObject}
 */
export function stateDelta(event) {
  return fromValueMap(event.actions?.state_delta);
}

/**
 * The tool calls an event asks for, args as plain values: `[{name, id, args}]`.
 * @param {any} event
 * @returns {{name: string, id: string | undefined, args: JsonValue}[]}
 */
export function functionCalls(event) {
  /** @type {any[]} */
  const parts = event.content?.parts ?? [];
  return parts
    .filter((p) => p.kind === 'function_call')
    .map((p) => ({ name: p.function_call.name, id: p.function_call.id, args: fromValue(p.function_call.args) }));
}

/**
 * A user message answering a tool call; pass it to `run` to resume the invocation.
 * @param {string} name
 * @param {string | undefined} id
 * @param {JsonValue} response
 */
export function functionResponse(name, id, response) {
  /** @type {any} */
  const fr = { name, response: toValue(response) };
  if (id !== undefined) fr.id = id;
  return { role: 'user', parts: [{ function_response: fr }] };
}
