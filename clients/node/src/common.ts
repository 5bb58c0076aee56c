// What both entry points (index.ts for Node.js, web.ts for browsers) export.
export { AdkClient, OnBusy, StreamingMode } from './client.js';
export type {
  AdkClientOptions,
  App,
  AppendOptions,
  ArtifactSource,
  CallOpts,
  Download,
  GeneratedMemoryView,
  Int64,
  LoadedArtifact,
  MemoryFactView,
  MemoryInput,
  MemoryRevisionView,
  MemoryView,
  RunOptions,
} from './client.js';
export { AdkError, Code, ERROR_REASONS, isReason, toAdkError } from './errors.js';
export type { ErrorReason, FieldViolation, KnownErrorReason } from './errors.js';
export type { RetryOptions } from './retry.js';
export { fromValue, fromValueMap, functionResponse, toValue, toValueMap } from './views.js';
export type {
  ArtifactMetadataView,
  ContentView,
  EventView,
  FunctionCallView,
  FunctionResponseView,
  JsonObject,
  JsonValue,
  PartView,
  SessionView,
} from './views.js';
