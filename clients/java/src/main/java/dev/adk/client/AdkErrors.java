package dev.adk.client;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import dev.adk.client.rpc.BadRequest;
import dev.adk.client.rpc.ErrorInfo;
import dev.adk.client.rpc.RetryInfo;
import dev.adk.v1.ErrorReason;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;
import java.util.Optional;

/**
 * Reads the error details the ADK servers attach to every non-OK status (clients/README.md,
 * "Errors"): the google.rpc ErrorInfo (a stable reason), RetryInfo (present exactly when a
 * retry may succeed) and BadRequest (the request field at fault). grpc-java hands out the
 * status's details as {@code Any}s; this finds and unpacks them.
 */
public final class AdkErrors {
  /** The ErrorInfo domain of every ADK error. */
  public static final String DOMAIN = "adk.dev";

  private AdkErrors() {}

  /**
   * The ErrorInfo of {@code t}'s status, if it carries one (a status the client made itself,
   * such as a deadline that passed before the server answered, carries none).
   */
  public static Optional<ErrorInfo> errorInfo(Throwable t) {
    return detail(t, ErrorInfo.class);
  }

  /** The ErrorInfo reason ("SESSION_NOT_FOUND"), or "" when there is none. */
  public static String reason(Throwable t) {
    return errorInfo(t).map(ErrorInfo::getReason).orElse("");
  }

  /** Whether {@code t}'s ErrorInfo carries {@code reason}. */
  public static boolean hasReason(Throwable t, ErrorReason reason) {
    return reason(t).equals(reason.name());
  }

  /** How long to wait before repeating the call; empty when the server says a retry is pointless. */
  public static Optional<Duration> retryDelay(Throwable t) {
    return detail(t, RetryInfo.class)
        .map(r -> Duration.ofSeconds(r.getRetryDelay().getSeconds(), r.getRetryDelay().getNanos()));
  }

  /** The request field an INVALID_ARGUMENT names ("app_name"), or "" when there is none. */
  public static String field(Throwable t) {
    return detail(t, BadRequest.class)
        .filter(b -> b.getFieldViolationsCount() > 0)
        .map(b -> b.getFieldViolations(0).getField())
        .orElse("");
  }

  private static <T extends Message> Optional<T> detail(Throwable t, Class<T> type) {
    com.google.rpc.Status status = StatusProto.fromThrowable(t);
    if (status == null) {
      return Optional.empty();
    }
    for (Any any : status.getDetailsList()) {
      if (any.is(type)) {
        try {
          return Optional.of(any.unpack(type));
        } catch (InvalidProtocolBufferException e) {
          return Optional.empty();
        }
      }
    }
    return Optional.empty();
  }
}
