// Typed errors: every failed call rejects with an AdkError carrying what the server put in
// `grpc-status-details-bin` (a google.rpc.Status): the ErrorInfo reason and metadata, the
// BadRequest field violations and the RetryInfo delay. Programs branch on `reason`, never on
// the English message.
import { Code, ConnectError } from '@connectrpc/connect';
import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema } from './gen/google/rpc/error_details_pb.js';

export { Code };

/**
 * The reasons the servers send (ErrorInfo.reason, domain `adk.dev`); `clients/README.md` lists
 * what each means. A newer server may send others, so `reason` is typed as any string too.
 */
export const ERROR_REASONS = [
  'SESSION_NOT_FOUND',
  'APP_NOT_FOUND',
  'ARTIFACT_NOT_FOUND',
  'EVENT_NOT_FOUND',
  'INVOCATION_NOT_FOUND',
  'NOT_FOUND',
  'SESSION_ALREADY_EXISTS',
  'ARTIFACT_VERSION_EXISTS',
  'ALREADY_EXISTS',
  'INVALID_ARGUMENT',
  'PRECONDITION_FAILED',
  'SESSION_BUSY',
  'LEASE_LOST',
  'REQUEST_INCOMPLETE',
  'ABORTED',
  'LIMIT_EXCEEDED',
  'RATE_LIMITED',
  'STORE_FULL',
  'RESOURCE_EXHAUSTED',
  'UNAVAILABLE',
  'DEADLINE_EXCEEDED',
  'FAILED_PRECONDITION',
  'MISCONFIGURED',
  'CANCELLED',
  'PERMISSION_DENIED',
  'UNAUTHENTICATED',
  'UNIMPLEMENTED',
  'AGENT_ERROR',
  'TOOL_ERROR',
  'MODEL_ERROR',
  'INTERNAL',
] as const;
export type KnownErrorReason = (typeof ERROR_REASONS)[number];
// `string & {}` keeps editor completion for the known reasons while accepting any string.
export type ErrorReason = KnownErrorReason | (string & {});

export interface FieldViolation {
  /** The request field, as the proto names it (`app_name`, `event.actions.state_delta`…). */
  field: string;
  description: string;
}

/** A failed call. `code` is the gRPC status; `reason` (with `metadata`) says which failure it was. */
export class AdkError extends Error {
  override readonly name = 'AdkError';
  /** The gRPC status code (`Code.NotFound`, `Code.InvalidArgument`…). */
  readonly code: Code;
  /** ErrorInfo.reason, or '' when the server sent no ErrorInfo (e.g. a transport failure). */
  readonly reason: ErrorReason;
  /** ErrorInfo.domain. */
  readonly domain: string;
  /** ErrorInfo.metadata: e.g. a limit's `limit` name and `value` for LIMIT_EXCEEDED. */
  readonly metadata: Readonly<Record<string, string>>;
  /** BadRequest field violations (INVALID_ARGUMENT). */
  readonly fieldViolations: readonly FieldViolation[];
  /** RetryInfo: when the server says the call may succeed if retried after this long. */
  readonly retryDelayMs: number | undefined;
  /** The server's message, without the code prefix ConnectError adds. */
  readonly rawMessage: string;

  constructor(error: ConnectError) {
    super(error.message, { cause: error });
    this.code = error.code;
    this.rawMessage = error.rawMessage;
    const info = error.findDetails(ErrorInfoSchema)[0];
    this.reason = info?.reason ?? '';
    this.domain = info?.domain ?? '';
    this.metadata = { ...(info?.metadata ?? {}) };
    this.fieldViolations = error
      .findDetails(BadRequestSchema)
      .flatMap((bad) => bad.fieldViolations.map(({ field, description }) => ({ field, description })));
    const retry = error.findDetails(RetryInfoSchema)[0]?.retryDelay;
    this.retryDelayMs = retry ? Number(retry.seconds) * 1000 + Math.round(retry.nanos / 1e6) : undefined;
  }

  /** Whether the server said to retry (RetryInfo) or the service was unreachable. */
  get retryable(): boolean {
    return this.code === Code.Unavailable || this.retryDelayMs !== undefined;
  }
}

/** Any failure of a call as an AdkError (an abort by the caller's signal stays as it is). */
export function toAdkError(error: unknown): unknown {
  if (error instanceof AdkError) return error;
  if (error instanceof ConnectError) return new AdkError(error);
  return error;
}

/** `err` is an AdkError with this reason. */
export function isReason(error: unknown, reason: ErrorReason): error is AdkError {
  return error instanceof AdkError && error.reason === reason;
}
