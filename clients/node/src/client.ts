// AdkClient: every RPC of adk.v1 (SessionService, ArtifactService, MemoryService, AgentRunner)
// over any Connect transport: gRPC over HTTP/2 in Node.js (index.ts), gRPC-Web in browsers
// (web.ts). Plain JSON for state and tool data, bigint for int64, typed errors (AdkError),
// retries only for calls that are safe to repeat (retry.ts).
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { DurationSchema } from '@bufbuild/protobuf/wkt';
import { createClient, type CallOptions, type Client, type Transport } from '@connectrpc/connect';
import { ArtifactService, type UploadArtifactRequestSchema, type UploadHeaderSchema } from './gen/adk/v1/artifact_pb.js';
import { EventSchema, type Event } from './gen/adk/v1/event_pb.js';
import {
  MemoryAction,
  MemoryEntrySchema,
  MemoryService,
  type GeneratedMemory,
  type MemoryEntry,
} from './gen/adk/v1/memory_pb.js';
import { AgentRunner, OnBusy, StreamingMode, type App } from './gen/adk/v1/runner_pb.js';
import { SessionService } from './gen/adk/v1/session_pb.js';
import { toAdkError } from './errors.js';
import { DEFAULT_RETRY, backoffMs, mayRetry, sleep, withRetry, type RetryOptions } from './retry.js';
import {
  eventView,
  contentView,
  fromValue,
  functionResponse,
  metadataView,
  sessionView,
  toContent,
  toPart,
  toValueMap,
  type ArtifactMetadataView,
  type ContentView,
  type EventView,
  type FunctionCallView,
  type JsonObject,
  type JsonValue,
  type MessageInput,
  type PartView,
  type SessionView,
} from './views.js';

export { OnBusy, StreamingMode };
export type { App };

/** An int64 in a request: a bigint, or a safe integer number, or its decimal string. */
export type Int64 = bigint | number | string;
const int64 = (value: Int64 | undefined): bigint | undefined => (value === undefined ? undefined : BigInt(value));

export interface AdkClientOptions {
  /** The deadline of each unary call [default 30000 ms]; streams have none unless given per call. */
  timeoutMs?: number;
  /** Retries of safe calls (see retry.ts) [default 4 attempts, 100 ms doubling to 5 s]. */
  retry?: RetryOptions;
  /** Headers sent with every call (e.g. `{authorization: 'Bearer …'}`). */
  headers?: Record<string, string>;
}

/** Per call: an AbortSignal to cancel it, a deadline, extra headers. */
export interface CallOpts {
  signal?: AbortSignal;
  timeoutMs?: number;
  headers?: Record<string, string>;
}

export interface AppendOptions extends CallOpts {
  author?: string;
  /** The event's id. With an id the append is retried on UNAVAILABLE: the server stores an id once. */
  id?: string;
  invocationId?: string;
  text?: string;
  /** Parts instead of (or besides) `text`. */
  parts?: PartView[];
  stateDelta?: JsonObject;
  /** Append only if the session's last event is still this one (else PRECONDITION_FAILED). */
  expectLastEventId?: string;
  /** Append only if the session's last sequence is still this (0: no events yet). */
  expectLastSequence?: Int64;
}

export interface RunOptions extends CallOpts {
  /** STREAMING_MODE_SSE: partial events (token chunks) first, then the complete event. */
  streaming?: boolean;
  stateDelta?: JsonObject;
  createSession?: boolean;
  maxLlmCalls?: number;
  /** Tell an agent the thoughts of the other agents whose turns it is told (ADK's RunConfig field; off: they stay their own). */
  includeThoughtsFromOtherAgents?: boolean;
  /** Keep the invocation running when this call is cancelled (re-attach with watchSession). */
  keepRunning?: boolean;
  onBusy?: OnBusy;
}

export interface ArtifactSource {
  /** Bytes, or text (stored as a text part), or chunks from anywhere (a file, a fetch body…). */
  data: Uint8Array | string | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
  mimeType?: string;
  customMetadata?: JsonObject;
  /** The version to save as: a retry then cannot store it twice, so it is retried. */
  version?: Int64;
  /** For streamed data: the total size, checked by the server before it stores anything. */
  sizeBytes?: Int64;
}

export interface LoadedArtifact extends ArtifactMetadataView {
  /** Text for a text artifact, bytes otherwise. */
  data: string | Uint8Array;
}

export interface Download {
  metadata: ArtifactMetadataView;
  /** The content in chunks, as they arrive: never all in memory at once. */
  chunks: AsyncIterable<Uint8Array>;
}

export interface MemoryInput {
  text?: string;
  content?: ContentView;
  author?: string;
  customMetadata?: JsonObject;
}

export interface MemoryView {
  id: string;
  content: ContentView | undefined;
  text: string;
  author: string;
  timestamp: Date | undefined;
  customMetadata: JsonObject;
  /** Set on a memory the server generated (generateMemories, ingestEvents). */
  fact?: MemoryFactView;
}

export interface MemoryFactView {
  topics: string[];
  /** 1 when created, one more at each update. */
  revision: number;
  sourceEventIds: string[];
  createTime: Date | undefined;
  updateTime: Date | undefined;
  expireTime: Date | undefined;
}

/** What a generation did to one memory: `action` is "CREATED", "UPDATED" or "DELETED". */
export interface GeneratedMemoryView {
  memory: MemoryView;
  action: string;
}

export interface MemoryRevisionView {
  revision: number;
  /** The fact as it read at this revision (empty for a deletion). */
  fact: string;
  topics: string[];
  sourceEventIds: string[];
  createTime: Date | undefined;
  action: string;
}

function dateOf(t: { seconds: bigint; nanos: number } | undefined): Date | undefined {
  return t && new Date(Number(t.seconds) * 1000 + t.nanos / 1e6);
}

function actionName(action: MemoryAction): string {
  return MemoryAction[action].replace(/^MEMORY_ACTION_/, '');
}

function memoryView(m: MemoryEntry): MemoryView {
  const content = contentView(m.content);
  return {
    id: m.id,
    content,
    text: (content?.parts ?? []).map((p) => ('text' in p ? p.text : '')).join(''),
    author: m.author,
    timestamp: dateOf(m.timestamp),
    customMetadata: m.customMetadata ?? {},
    fact: m.fact && {
      topics: [...m.fact.topics],
      revision: Number(m.fact.revision),
      sourceEventIds: [...m.fact.sourceEventIds],
      createTime: dateOf(m.fact.createTime),
      updateTime: dateOf(m.fact.updateTime),
      expireTime: dateOf(m.fact.expireTime),
    },
  };
}

function generatedView(g: GeneratedMemory): GeneratedMemoryView {
  return { memory: memoryView(g.memory ?? create(MemoryEntrySchema)), action: actionName(g.action) };
}

const STREAM_CHUNK_BYTES = 256 * 1024;

export class AdkClient {
  /** The generated Connect clients, for anything the methods below leave out. */
  readonly sessions: Client<typeof SessionService>;
  readonly artifacts: Client<typeof ArtifactService>;
  readonly memory: Client<typeof MemoryService>;
  readonly runner: Client<typeof AgentRunner>;
  readonly #timeoutMs: number;
  readonly #retry: Required<RetryOptions>;
  readonly #headers: Record<string, string>;

  /** One transport for every service (adk-server), or one per service. */
  constructor(
    transport: Transport | { sessions: Transport; artifacts: Transport; memory?: Transport; runner: Transport },
    options: AdkClientOptions = {},
  ) {
    const t = 'sessions' in transport ? transport : { sessions: transport, artifacts: transport, memory: transport, runner: transport };
    this.sessions = createClient(SessionService, t.sessions);
    this.artifacts = createClient(ArtifactService, t.artifacts);
    this.memory = createClient(MemoryService, t.memory ?? t.sessions);
    this.runner = createClient(AgentRunner, t.runner);
    this.#timeoutMs = options.timeoutMs ?? 30000;
    this.#retry = { ...DEFAULT_RETRY, ...options.retry };
    this.#headers = options.headers ?? {};
  }

  #opts(opts: CallOpts = {}, stream = false): CallOptions {
    return {
      signal: opts.signal,
      timeoutMs: opts.timeoutMs ?? (stream ? undefined : this.#timeoutMs),
      headers: { ...this.#headers, ...opts.headers },
    };
  }

  /** A unary call, retried when `safe`. */
  #call<T>(safe: boolean, opts: CallOpts | undefined, call: (o: CallOptions) => Promise<T>): Promise<T> {
    return withRetry(this.#retry, safe, () => call(this.#opts(opts)), opts?.signal);
  }

  // ---- sessions ------------------------------------------------------------------------

  async createSession(
    app: string,
    user: string,
    opts: CallOpts & { sessionId?: string; state?: JsonObject; ttlSeconds?: number } = {},
  ): Promise<SessionView> {
    const ttl = opts.ttlSeconds === undefined ? undefined : create(DurationSchema, { seconds: BigInt(Math.trunc(opts.ttlSeconds)) });
    const session = await this.#call(false, opts, (o) =>
      this.sessions.createSession({ appName: app, userId: user, sessionId: opts.sessionId ?? '', state: opts.state, ttl }, o),
    );
    return sessionView(session);
  }

  async getSession(
    app: string,
    user: string,
    sessionId: string,
    opts: CallOpts & { numRecentEvents?: number; after?: Date; sinceCompaction?: boolean } = {},
  ): Promise<SessionView> {
    const after = opts.after && {
      seconds: BigInt(Math.floor(opts.after.getTime() / 1000)),
      nanos: (opts.after.getTime() % 1000) * 1e6,
    };
    const session = await this.#call(true, opts, (o) =>
      this.sessions.getSession(
        { appName: app, userId: user, sessionId, numRecentEvents: opts.numRecentEvents, after, sinceCompaction: opts.sinceCompaction },
        o,
      ),
    );
    return sessionView(session);
  }

  /** Every session of the user (or of the app, with user ''), page by page as the loop asks. */
  async *listSessions(app: string, user = '', opts: CallOpts & { pageSize?: number } = {}): AsyncGenerator<SessionView> {
    let pageToken = '';
    do {
      const token = pageToken;
      const page = await this.#call(true, opts, (o) =>
        this.sessions.listSessions({ appName: app, userId: user, pageSize: opts.pageSize ?? 0, pageToken: token }, o),
      );
      yield* page.sessions.map(sessionView);
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  async deleteSession(app: string, user: string, sessionId: string, opts?: CallOpts): Promise<void> {
    await this.#call(false, opts, (o) => this.sessions.deleteSession({ appName: app, userId: user, sessionId }, o));
  }

  async appendEvent(app: string, user: string, sessionId: string, opts: AppendOptions = {}): Promise<EventView> {
    const author = opts.author ?? 'user';
    const parts = [...(opts.text === undefined ? [] : [{ text: opts.text }]), ...(opts.parts ?? [])];
    const event = create(EventSchema, {
      id: opts.id ?? '',
      invocationId: opts.invocationId ?? '',
      author,
      content: parts.length ? { role: author === 'user' ? 'user' : 'model', parts: parts.map(toPart) } : undefined,
      actions: { stateDelta: toValueMap(opts.stateDelta) },
    });
    const expected =
      opts.expectLastEventId !== undefined
        ? { case: 'lastEventId' as const, value: opts.expectLastEventId }
        : opts.expectLastSequence !== undefined
          ? { case: 'lastSequence' as const, value: BigInt(opts.expectLastSequence) }
          : undefined;
    const stored = await this.#call(Boolean(opts.id), opts, (o) =>
      this.sessions.appendEvent(
        { appName: app, userId: user, sessionId, event, precondition: expected && { expected } },
        o,
      ),
    );
    return eventView(stored);
  }

  /** The session's events, oldest first (or newest first), fetched a page at a time. */
  async *listEvents(
    app: string,
    user: string,
    sessionId: string,
    opts: CallOpts & { pageSize?: number; newestFirst?: boolean } = {},
  ): AsyncGenerator<EventView> {
    let pageToken = '';
    do {
      const token = pageToken;
      const page = await this.#call(true, opts, (o) =>
        this.sessions.listEvents(
          { appName: app, userId: user, sessionId, pageSize: opts.pageSize ?? 0, pageToken: token, newestFirst: opts.newestFirst ?? false },
          o,
        ),
      );
      yield* page.events.map(eventView);
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /**
   * The session's events as they are appended (after `afterSequence`, if given: 0n replays the
   * whole log first), until the loop stops or `signal` aborts. A dropped connection or a server
   * restart is resumed from the last sequence seen, with backoff: nothing missed, nothing twice.
   * Ends with an AdkError (SESSION_NOT_FOUND) when the session is deleted or expires; keeps
   * reconnecting (backoff capped at `retry.maxDelayMs`) while the server is unreachable.
   */
  async *watchSession(
    app: string,
    user: string,
    sessionId: string,
    opts: CallOpts & { afterSequence?: Int64 } = {},
  ): AsyncGenerator<EventView> {
    let after = int64(opts.afterSequence);
    let failures = 0;
    for (;;) {
      try {
        // A watch "from now on" starts after the last event stored when it starts, so a drop
        // before its first event resumes from there: nothing appended meanwhile is missed.
        after ??= await this.#lastSequence(app, user, sessionId, opts);
        for await (const event of this.sessions.watchSession(
          { appName: app, userId: user, sessionId, afterSequence: after },
          this.#opts(opts, true),
        )) {
          failures = 0;
          after = event.sequence;
          yield eventView(event);
        }
        // The server ended the watch (it is shutting down): resume on the next one.
      } catch (raw) {
        const error = toAdkError(raw);
        if (!mayRetry(error, opts.signal)) throw error;
      }
      failures++;
      // Reconnect backoff of a dropped watch (cut short by `signal`); it then resumes from `after`.
      await sleep(backoffMs(this.#retry, Math.min(failures, 8)), opts.signal);
    }
  }

  /** Where a watch "from now on" starts: the sequence of the last stored event (0n if none). */
  async #lastSequence(app: string, user: string, sessionId: string, opts: CallOpts): Promise<bigint> {
    for await (const event of this.listEvents(app, user, sessionId, { ...opts, pageSize: 1, newestFirst: true })) {
      return event.sequence;
    }
    return 0n;
  }

  /** The user's state (keys without their `user:` prefix). */
  async getUserState(app: string, user: string, opts?: CallOpts): Promise<JsonObject> {
    return (await this.#call(true, opts, (o) => this.sessions.getUserState({ appName: app, userId: user }, o))).state ?? {};
  }

  /** The app's state (keys without their `app:` prefix). */
  async getAppState(app: string, opts?: CallOpts): Promise<JsonObject> {
    return (await this.#call(true, opts, (o) => this.sessions.getAppState({ appName: app }, o))).state ?? {};
  }

  /** Merges `delta` (`app:` keys) into the app's state (null deletes a key); resolves to the new state. */
  async updateAppState(app: string, delta: JsonObject, opts?: CallOpts): Promise<JsonObject> {
    return (await this.#call(false, opts, (o) => this.sessions.updateAppState({ appName: app, stateDelta: delta }, o))).state ?? {};
  }

  /** A copy of the session (up to and including `upToEventId`, default all) as a new session. */
  async forkSession(
    app: string,
    user: string,
    sessionId: string,
    opts: CallOpts & { upToEventId?: string; newSessionId?: string } = {},
  ): Promise<SessionView> {
    const session = await this.#call(false, opts, (o) =>
      this.sessions.forkSession(
        { appName: app, userId: user, sessionId, upToEventId: opts.upToEventId ?? '', newSessionId: opts.newSessionId ?? '' },
        o,
      ),
    );
    return sessionView(session);
  }

  // ---- artifacts -----------------------------------------------------------------------

  /**
   * Saves an artifact; resolves to its version. Bytes and text up to one message go in one
   * call; iterables of chunks stream (UploadArtifact) without being held in memory.
   */
  async saveArtifact(app: string, user: string, sessionId: string, fileName: string, source: ArtifactSource, opts?: CallOpts): Promise<bigint> {
    const ref = { appName: app, userId: user, sessionId, fileName };
    const version = int64(source.version);
    const { data } = source;
    if (typeof data === 'string' || data instanceof Uint8Array) {
      const isText = typeof data === 'string' && (source.mimeType === undefined || source.mimeType === 'text/plain');
      const part: PartView = isText
        ? { text: data as string }
        : {
            inlineData: {
              mimeType: source.mimeType ?? 'application/octet-stream',
              data: typeof data === 'string' ? new TextEncoder().encode(data) : data,
            },
          };
      const reply = await this.#call(version !== undefined, opts, (o) =>
        this.artifacts.saveArtifact({ ref, part: toPart(part), version, customMetadata: source.customMetadata }, o),
      );
      return reply.version;
    }
    const header = {
      ref,
      mimeType: source.mimeType ?? 'application/octet-stream',
      version,
      customMetadata: source.customMetadata,
      sizeBytes: int64(source.sizeBytes),
    };
    // A stream is consumed by the first attempt: only a repeatable source (an array) is retried.
    const repeatable = version !== undefined && Array.isArray(data);
    const reply = await this.#call(repeatable, opts, (o) => this.artifacts.uploadArtifact(uploadMessages(header, data), o));
    return reply.version;
  }

  /** Loads an artifact (the latest version unless `version`) in one message. */
  async loadArtifact(
    app: string,
    user: string,
    sessionId: string,
    fileName: string,
    opts: CallOpts & { version?: Int64 } = {},
  ): Promise<LoadedArtifact> {
    const reply = await this.#call(true, opts, (o) =>
      this.artifacts.loadArtifact({ ref: { appName: app, userId: user, sessionId, fileName }, version: int64(opts.version) }, o),
    );
    const kind = reply.part?.kind;
    const data = kind?.case === 'text' ? kind.value : kind?.case === 'inlineData' ? kind.value.data : new Uint8Array();
    return { ...metadataView(reply.metadata), version: reply.version, data };
  }

  /** Streams an artifact down (DownloadArtifact): its metadata first, then its chunks as they arrive. */
  async downloadArtifact(
    app: string,
    user: string,
    sessionId: string,
    fileName: string,
    opts: CallOpts & { version?: Int64; chunkSize?: number } = {},
  ): Promise<Download> {
    const request = { ref: { appName: app, userId: user, sessionId, fileName }, version: int64(opts.version), chunkSize: opts.chunkSize ?? 0 };
    // Until the metadata is in nothing has been handed out, so opening the stream is a safe retry.
    return withRetry(
      this.#retry,
      true,
      async () => {
        const stream = this.artifacts.downloadArtifact(request, this.#opts(opts, true))[Symbol.asyncIterator]();
        const first = await stream.next();
        if (first.done || first.value.message.case !== 'metadata') {
          throw new Error('DownloadArtifact: the stream did not start with the metadata');
        }
        const metadata = metadataView(first.value.message.value);
        async function* chunks(): AsyncGenerator<Uint8Array> {
          try {
            for (let next = await stream.next(); !next.done; next = await stream.next()) {
              if (next.value.message.case === 'chunk') yield next.value.message.value;
            }
          } catch (error) {
            throw toAdkError(error);
          } finally {
            await stream.return?.();
          }
        }
        return { metadata, chunks: chunks() };
      },
      opts.signal,
    );
  }

  async deleteArtifact(app: string, user: string, sessionId: string, fileName: string, opts: CallOpts & { version?: Int64 } = {}): Promise<void> {
    await this.#call(false, opts, (o) =>
      this.artifacts.deleteArtifact({ ref: { appName: app, userId: user, sessionId, fileName }, version: int64(opts.version) }, o),
    );
  }

  /** The session's artifact names and the user's (`user:` names). */
  async listArtifacts(app: string, user: string, sessionId: string, opts?: CallOpts): Promise<string[]> {
    return (await this.#call(true, opts, (o) => this.artifacts.listArtifacts({ appName: app, userId: user, sessionId }, o))).fileNames;
  }

  /** The artifact's versions, newest first. */
  async listVersions(app: string, user: string, sessionId: string, fileName: string, opts?: CallOpts): Promise<bigint[]> {
    const reply = await this.#call(true, opts, (o) => this.artifacts.listVersions({ ref: { appName: app, userId: user, sessionId, fileName } }, o));
    return reply.versions;
  }

  async getArtifactMetadata(
    app: string,
    user: string,
    sessionId: string,
    fileName: string,
    opts: CallOpts & { version?: Int64 } = {},
  ): Promise<ArtifactMetadataView> {
    const reply = await this.#call(true, opts, (o) =>
      this.artifacts.getArtifactMetadata({ ref: { appName: app, userId: user, sessionId, fileName }, version: int64(opts.version) }, o),
    );
    return metadataView(reply);
  }

  // ---- memory --------------------------------------------------------------------------

  /** Adds the session's events to the user's long-term memory; resolves to the new memory ids. */
  async addSessionToMemory(app: string, user: string, sessionId: string, opts?: CallOpts): Promise<string[]> {
    return (await this.#call(false, opts, (o) => this.memory.addSessionToMemory({ appName: app, userId: user, sessionId }, o))).memoryIds;
  }

  /** Adds some of a session's events (as `message`s of EventView) to memory. */
  async addEventsToMemory(
    app: string,
    user: string,
    sessionId: string,
    events: (EventView | Event)[],
    opts: CallOpts & { customMetadata?: JsonObject } = {},
  ): Promise<string[]> {
    const messages = events.map((e) => ('message' in e ? e.message : e));
    const reply = await this.#call(false, opts, (o) =>
      this.memory.addEventsToMemory({ appName: app, userId: user, sessionId, events: messages, customMetadata: opts.customMetadata }, o),
    );
    return reply.memoryIds;
  }

  /** Adds memories written by the app (facts, preferences…). */
  async addMemory(app: string, user: string, memories: MemoryInput[], opts: CallOpts & { customMetadata?: JsonObject } = {}): Promise<string[]> {
    const entries = memories.map((m) => ({
      content: toContent(m.content ?? m.text ?? '', 'user'),
      author: m.author ?? '',
      customMetadata: m.customMetadata,
    }));
    const reply = await this.#call(false, opts, (o) =>
      this.memory.addMemory({ appName: app, userId: user, memories: entries, customMetadata: opts.customMetadata }, o),
    );
    return reply.memoryIds;
  }

  async searchMemory(app: string, user: string, query: string, opts: CallOpts & { limit?: number } = {}): Promise<MemoryView[]> {
    const reply = await this.#call(true, opts, (o) => this.memory.searchMemory({ appName: app, userId: user, query, limit: opts.limit ?? 0 }, o));
    return reply.memories.map(memoryView);
  }

  /**
   * Has the server's model extract the facts of a stored session (`sessionId`) or of `events`
   * and consolidate them with the user's memories (Memory Bank's GenerateMemories); resolves to
   * the memories created, updated or deleted. `topics`: managed labels or `{label, description}`,
   * instead of the app's; `ttlSeconds` 0: the app's. Retried: a retry generates nothing twice.
   */
  async generateMemories(
    app: string,
    user: string,
    opts: CallOpts & {
      sessionId?: string;
      events?: (EventView | Event)[];
      topics?: (string | { label: string; description: string })[];
      ttlSeconds?: number;
    } = {},
  ): Promise<GeneratedMemoryView[]> {
    const reply = await this.#call(true, opts, (o) =>
      this.memory.generateMemories(
        {
          appName: app,
          userId: user,
          sourceSessionId: opts.sessionId ?? '',
          events: (opts.events ?? []).map((e) => ('message' in e ? e.message : e)),
          topics: (opts.topics ?? []).map((t) => (typeof t === 'string' ? { label: t, description: '' } : t)),
          ttlSeconds: BigInt(opts.ttlSeconds ?? 0),
        },
        o,
      ),
    );
    return reply.memories.map(generatedView);
  }

  /**
   * Buffers events for the server's generation (Memory Bank's IngestEvents), which runs when the
   * app's event count or idle time is reached; `forceFlush` generates from the user's whole buffer
   * now and resolves with its changes. Retried: the server buffers each event once, by id.
   */
  async ingestEvents(
    app: string,
    user: string,
    events: (EventView | Event)[],
    opts: CallOpts & { streamId?: string; forceFlush?: boolean } = {},
  ): Promise<{ bufferedEvents: number; memories: GeneratedMemoryView[] }> {
    const reply = await this.#call(true, opts, (o) =>
      this.memory.ingestEvents(
        {
          appName: app,
          userId: user,
          streamId: opts.streamId ?? '',
          events: events.map((e) => ('message' in e ? e.message : e)),
          forceFlush: opts.forceFlush ?? false,
        },
        o,
      ),
    );
    return { bufferedEvents: Number(reply.bufferedEvents), memories: reply.memories.map(generatedView) };
  }

  /** Every revision of one generated memory, oldest first. */
  async listMemoryRevisions(app: string, user: string, memoryId: string, opts?: CallOpts): Promise<MemoryRevisionView[]> {
    const reply = await this.#call(true, opts, (o) => this.memory.listMemoryRevisions({ appName: app, userId: user, memoryId }, o));
    return reply.revisions.map((r) => ({
      revision: Number(r.revision),
      fact: r.fact,
      topics: [...r.topics],
      sourceEventIds: [...r.sourceEventIds],
      createTime: dateOf(r.createTime),
      action: actionName(r.action),
    }));
  }

  /** Resolves to whether the memory existed. */
  async deleteMemory(app: string, user: string, memoryId: string, opts?: CallOpts): Promise<boolean> {
    return (await this.#call(false, opts, (o) => this.memory.deleteMemory({ appName: app, userId: user, memoryId }, o))).deleted;
  }

  // ---- runner --------------------------------------------------------------------------

  /**
   * Runs the app's agent on a message and yields its events as they come: first the stored user
   * event, then the agents' (partial chunks before each complete event with `streaming`).
   * Leaving the loop early cancels the invocation (unless `keepRunning`). Never retried: a run
   * is not safe to repeat.
   */
  async *run(app: string, user: string, sessionId: string, message: MessageInput, opts: RunOptions = {}): AsyncGenerator<EventView> {
    const request = {
      appName: app,
      userId: user,
      sessionId,
      newMessage: toContent(message),
      stateDelta: toValueMap(opts.stateDelta),
      runConfig: {
        streamingMode: opts.streaming ? StreamingMode.SSE : StreamingMode.NONE,
        maxLlmCalls: opts.maxLlmCalls ?? 0,
        includeThoughtsFromOtherAgents: opts.includeThoughtsFromOtherAgents ?? false,
      },
      createSession: opts.createSession ?? false,
      keepRunning: opts.keepRunning ?? false,
      onBusy: opts.onBusy ?? OnBusy.UNSPECIFIED,
    };
    // Our own controller, so that leaving the loop early cancels the call (and the invocation).
    const controller = new AbortController();
    const abort = () => controller.abort(opts.signal?.reason);
    opts.signal?.addEventListener('abort', abort, { once: true });
    try {
      for await (const event of this.runner.run(request, { ...this.#opts(opts, true), signal: controller.signal })) {
        yield eventView(event);
      }
    } catch (error) {
      throw toAdkError(error);
    } finally {
      opts.signal?.removeEventListener('abort', abort);
      controller.abort();
    }
  }

  /**
   * Runs and answers the client-tool calls the agent makes (`longRunningToolIds`) with
   * `answer(call)`, resuming the invocation each time, until it asks for nothing more.
   * Yields every event of every round.
   */
  async *runWithTools(
    app: string,
    user: string,
    sessionId: string,
    message: MessageInput,
    answer: (call: FunctionCallView, event: EventView) => JsonValue | Promise<JsonValue>,
    opts: RunOptions = {},
  ): AsyncGenerator<EventView> {
    let next: MessageInput | undefined = message;
    let round = opts;
    while (next !== undefined) {
      const pending: { call: FunctionCallView; event: EventView }[] = [];
      for await (const event of this.run(app, user, sessionId, next, round)) {
        for (const call of event.functionCalls) {
          if (event.longRunningToolIds.includes(call.id)) pending.push({ call, event });
        }
        yield event;
      }
      round = { ...opts, createSession: false };
      next = pending.length ? await answerCalls(pending, answer) : undefined;
    }
  }

  async listApps(opts?: CallOpts): Promise<App[]> {
    return (await this.#call(true, opts, (o) => this.runner.listApps({}, o))).apps;
  }

  /** The app's agent tree and tools (tool schemas as JSON: `fromValue(tool.parametersSchema)`). */
  async getApp(app: string, opts?: CallOpts): Promise<App> {
    return this.#call(true, opts, (o) => this.runner.getApp({ appName: app }, o));
  }

  /** Stops a running invocation (any replica); resolves to whether one was running. */
  async cancel(app: string, user: string, sessionId: string, invocationId: string, opts?: CallOpts): Promise<boolean> {
    // Cancelling twice is the same as once: safe to retry.
    return (await this.#call(true, opts, (o) => this.runner.cancel({ appName: app, userId: user, sessionId, invocationId }, o))).cancelled;
  }

  /** Rewinds the session to before an invocation; resolves to the stored rewind event. */
  async rewind(app: string, user: string, sessionId: string, rewindBeforeInvocationId: string, opts?: CallOpts): Promise<EventView> {
    const event = await this.#call(false, opts, (o) =>
      this.runner.rewind({ appName: app, userId: user, sessionId, rewindBeforeInvocationId }, o),
    );
    return eventView(event);
  }
}

async function answerCalls(
  pending: { call: FunctionCallView; event: EventView }[],
  answer: (call: FunctionCallView, event: EventView) => JsonValue | Promise<JsonValue>,
): Promise<ContentView> {
  const parts: PartView[] = [];
  for (const { call, event } of pending) {
    parts.push(...functionResponse(call, await answer(call, event)).parts);
  }
  return { role: 'user', parts };
}

async function* uploadMessages(
  header: MessageInitShape<typeof UploadHeaderSchema>,
  data: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
): AsyncGenerator<MessageInitShape<typeof UploadArtifactRequestSchema>> {
  yield { message: { case: 'header', value: header } };
  for await (const chunk of data) {
    // Big chunks are split so each message stays well under the 4 MiB message limit.
    for (let offset = 0; offset < chunk.length; offset += STREAM_CHUNK_BYTES) {
      yield { message: { case: 'chunk', value: chunk.subarray(offset, offset + STREAM_CHUNK_BYTES) } };
    }
  }
}

export { fromValue };
