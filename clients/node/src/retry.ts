// Retries with backoff, for calls that are safe to repeat only: reads, an append that carries
// its event id (the server stores an id once), a save with an explicit version (a second save of
// that version fails rather than adding one). Everything else is tried once.
import { AdkError, Code, toAdkError } from './errors.js';

export interface RetryOptions {
  /** Attempts in all, the first included [default 4]; 1 turns retries off. */
  maxAttempts?: number;
  /** The first backoff; each next one doubles, with full jitter [default 100 ms]. */
  initialDelayMs?: number;
  /** The longest backoff (a server's RetryInfo delay is honoured up to this too) [default 5000 ms]. */
  maxDelayMs?: number;
}

export const DEFAULT_RETRY: Required<RetryOptions> = { maxAttempts: 4, initialDelayMs: 100, maxDelayMs: 5000 };

/** How long to wait before attempt `attempt + 1`, after `error`. */
export function backoffMs(policy: Required<RetryOptions>, attempt: number, error?: AdkError): number {
  const exponential = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (attempt - 1));
  const jittered = Math.random() * exponential;
  // The server knows best when a busy session or a rate limit frees up.
  return error?.retryDelayMs !== undefined ? Math.min(policy.maxDelayMs, Math.max(error.retryDelayMs, jittered)) : jittered;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Whether a failed call may succeed if repeated: the server said so (RetryInfo), could not be
 * reached (UNAVAILABLE), or the connection died under the call (CANCELED that the caller's own
 * signal did not cause, e.g. a server killed mid-call).
 */
export function mayRetry(error: unknown, signal?: AbortSignal): error is AdkError {
  if (!(error instanceof AdkError) || signal?.aborted) return false;
  return error.retryable || error.code === Code.Canceled;
}

/**
 * Runs `call`, repeating it (with backoff) while `safe` and the failure `mayRetry`. Errors come
 * out as AdkError.
 */
export async function withRetry<T>(
  policy: Required<RetryOptions>,
  safe: boolean,
  call: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (raw) {
      const error = toAdkError(raw);
      if (!safe || attempt >= policy.maxAttempts || !mayRetry(error, signal)) throw error;
      // Backoff between retries of a safe call (RetryInfo or exponential), not a wait for a condition.
      await sleep(backoffMs(policy, attempt, error), signal);
    }
  }
}
