// Plain views of the generated messages: state, tool arguments and results are JSON values
// (never google.protobuf.Struct/Value), times are Dates, int64 are bigints. Conversions go
// through @bufbuild/protobuf's own JSON mapping, so a value that is not JSON fails loudly.
import { create, fromJson, toJson, type JsonObject, type JsonValue } from '@bufbuild/protobuf';
import { ValueSchema, timestampDate, type Timestamp, type Value } from '@bufbuild/protobuf/wkt';
import { ContentSchema, PartSchema, type Content, type Part } from './gen/adk/v1/content_pb.js';
import type { Event } from './gen/adk/v1/event_pb.js';
import type { Session } from './gen/adk/v1/session_pb.js';
import type { ArtifactMetadata } from './gen/adk/v1/artifact_pb.js';

export type { JsonObject, JsonValue };

export function toValue(json: JsonValue): Value {
  return fromJson(ValueSchema, json);
}

export function fromValue(value: Value | undefined): JsonValue {
  return value === undefined ? null : toJson(ValueSchema, value);
}

export function toValueMap(json: JsonObject | undefined): { [key: string]: Value } {
  return Object.fromEntries(Object.entries(json ?? {}).map(([key, value]) => [key, toValue(value)]));
}

export function fromValueMap(map: { [key: string]: Value } | undefined): JsonObject {
  return Object.fromEntries(Object.entries(map ?? {}).map(([key, value]) => [key, fromValue(value)]));
}

export function toDate(timestamp: Timestamp | undefined): Date | undefined {
  return timestamp ? timestampDate(timestamp) : undefined;
}

export interface FunctionCallView {
  name: string;
  /** The id to answer with (`functionResponse`); '' when the model gave none. */
  id: string;
  args: JsonValue;
}

export interface FunctionResponseView {
  name: string;
  id: string;
  response: JsonValue;
}

/** One part of a message, as a plain object: exactly one of these keys. */
export type PartView =
  | { text: string; thought?: boolean }
  | { inlineData: { mimeType: string; data: Uint8Array; displayName?: string } }
  | { fileData: { mimeType: string; fileUri: string; displayName?: string } }
  | { functionCall: FunctionCallView }
  | { functionResponse: FunctionResponseView }
  /** Executable code and its results, as generated (rarely needed). */
  | { other: Part };

export interface ContentView {
  role: string;
  parts: PartView[];
}

/** An event of a session or a run. `message` has every field, as generated. */
export interface EventView {
  id: string;
  invocationId: string;
  author: string;
  branch: string;
  /** The event's position in its session (1, 2, …); 0 for partial events, which are never stored. */
  sequence: bigint;
  timestamp: Date | undefined;
  /** A streamed chunk (STREAMING_MODE_SSE); the complete event follows. */
  partial: boolean;
  turnComplete: boolean;
  interrupted: boolean;
  errorCode: string | undefined;
  errorMessage: string | undefined;
  content: ContentView | undefined;
  /** The text parts, joined. */
  text: string;
  functionCalls: FunctionCallView[];
  functionResponses: FunctionResponseView[];
  /** The ids of the client-tool calls the client answers (see `AdkClient.answerToolCalls`). */
  longRunningToolIds: string[];
  stateDelta: JsonObject;
  artifactDelta: Record<string, bigint>;
  message: Event;
}

export interface SessionView {
  appName: string;
  userId: string;
  id: string;
  /** The merged state: app: and user: keys with the session's own. */
  state: JsonObject;
  events: EventView[];
  eventCount: bigint;
  createTime: Date | undefined;
  lastUpdateTime: Date | undefined;
  expireTime: Date | undefined;
}

export interface ArtifactMetadataView {
  fileName: string;
  version: bigint;
  mimeType: string;
  sizeBytes: bigint;
  isText: boolean;
  isFileUri: boolean;
  customMetadata: JsonObject;
  createTime: Date | undefined;
}

export function partView(part: Part): PartView {
  switch (part.kind.case) {
    case 'text':
      return part.thought ? { text: part.kind.value, thought: true } : { text: part.kind.value };
    case 'inlineData': {
      const { mimeType, data, displayName } = part.kind.value;
      return { inlineData: { mimeType, data, ...(displayName !== undefined && { displayName }) } };
    }
    case 'fileData': {
      const { mimeType, fileUri, displayName } = part.kind.value;
      return { fileData: { mimeType, fileUri, ...(displayName !== undefined && { displayName }) } };
    }
    case 'functionCall': {
      const { name, id, args } = part.kind.value;
      return { functionCall: { name, id: id ?? '', args: fromValue(args) } };
    }
    case 'functionResponse': {
      const { name, id, response } = part.kind.value;
      return { functionResponse: { name, id: id ?? '', response: fromValue(response) } };
    }
    default:
      return { other: part };
  }
}

/** A part for a message: text, bytes, a function response… (the inverse of `partView`). */
export function toPart(part: PartView): Part {
  if ('text' in part) return create(PartSchema, { kind: { case: 'text', value: part.text }, thought: part.thought });
  if ('inlineData' in part) return create(PartSchema, { kind: { case: 'inlineData', value: part.inlineData } });
  if ('fileData' in part) return create(PartSchema, { kind: { case: 'fileData', value: part.fileData } });
  if ('functionCall' in part) {
    const { name, id, args } = part.functionCall;
    return create(PartSchema, { kind: { case: 'functionCall', value: { name, id: id || undefined, args: toValue(args) } } });
  }
  if ('functionResponse' in part) {
    const { name, id, response } = part.functionResponse;
    return create(PartSchema, {
      kind: { case: 'functionResponse', value: { name, id: id || undefined, response: toValue(response) } },
    });
  }
  return part.other;
}

/** A message: text, or parts. */
export type MessageInput = string | ContentView;

export function toContent(message: MessageInput, role = 'user'): Content {
  if (typeof message === 'string') return create(ContentSchema, { role, parts: [{ kind: { case: 'text', value: message } }] });
  return create(ContentSchema, { role: message.role || role, parts: message.parts.map(toPart) });
}

export function contentView(content: Content | undefined): ContentView | undefined {
  return content && { role: content.role, parts: content.parts.map(partView) };
}

export function eventView(event: Event): EventView {
  const content = contentView(event.content);
  const parts = content?.parts ?? [];
  return {
    id: event.id,
    invocationId: event.invocationId,
    author: event.author,
    branch: event.branch,
    sequence: event.sequence,
    timestamp: toDate(event.timestamp),
    partial: event.partial ?? false,
    turnComplete: event.turnComplete ?? false,
    interrupted: event.interrupted ?? false,
    errorCode: event.errorCode,
    errorMessage: event.errorMessage,
    content,
    text: parts.map((part) => ('text' in part && !part.thought ? part.text : '')).join(''),
    functionCalls: parts.flatMap((part) => ('functionCall' in part ? [part.functionCall] : [])),
    functionResponses: parts.flatMap((part) => ('functionResponse' in part ? [part.functionResponse] : [])),
    longRunningToolIds: event.longRunningToolIds,
    stateDelta: fromValueMap(event.actions?.stateDelta),
    artifactDelta: { ...(event.actions?.artifactDelta ?? {}) },
    message: event,
  };
}

export function sessionView(session: Session): SessionView {
  return {
    appName: session.appName,
    userId: session.userId,
    id: session.id,
    state: session.state ?? {},
    events: session.events.map(eventView),
    eventCount: session.eventCount,
    createTime: toDate(session.createTime),
    lastUpdateTime: toDate(session.lastUpdateTime),
    expireTime: toDate(session.expireTime),
  };
}

export function metadataView(metadata: ArtifactMetadata | undefined): ArtifactMetadataView {
  return {
    fileName: metadata?.fileName ?? '',
    version: metadata?.version ?? 0n,
    mimeType: metadata?.mimeType ?? '',
    sizeBytes: metadata?.sizeBytes ?? 0n,
    isText: metadata?.isText ?? false,
    isFileUri: metadata?.isFileUri ?? false,
    customMetadata: metadata?.customMetadata ?? {},
    createTime: toDate(metadata?.createTime),
  };
}

/** The message answering a client tool's call: run it with `AdkClient.run` to resume the invocation. */
export function functionResponse(call: Pick<FunctionCallView, 'name' | 'id'>, response: JsonValue): ContentView {
  return { role: 'user', parts: [{ functionResponse: { name: call.name, id: call.id, response } }] };
}
