// Typed errors: every failed call rejects with an AdkError carrying what the server put in
// `grpc-status-details-bin` (a google.rpc.Status): the ErrorInfo reason and metadata, the
// BadRequest field violations and the RetryInfo delay. Programs branch on `reason`, never on
// the English message.
import { Code, ConnectError } from '@connectrpc/connect';
import { ErrorReasonSchema, ErrorReason as ErrorReasonValue } from './gen/adk/v1/errors_pb.js';
import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema } from './gen/google/rpc/error_details_pb.js';

export { Code };

/** A reason the servers send: a value of the enum `adk.v1.ErrorReason` but its zero value. */
export type KnownErrorReason = Exclude<keyof typeof ErrorReasonValue, 'ERROR_REASON_UNSPECIFIED'>;

/**
 * The reasons the servers send (ErrorInfo.reason, domain `adk.dev`), in the proto's order: the
 * values of the enum `adk.v1.ErrorReason` of `proto/adk/v1/errors.proto`, whose comments say
 * what each means, read from the code generated from it. A newer server may send others, so
 * `reason` is typed as any string too.
 */
export const ERROR_REASONS: readonly KnownErrorReason[] = Object.freeze(
  ErrorReasonSchema.values
    .filter((value) => value.number !== ErrorReasonValue.ERROR_REASON_UNSPECIFIED)
    // The wire string is the value's proto name, which is also its name in the generated enum.
    .map((value) => value.name as KnownErrorReason),
);
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
