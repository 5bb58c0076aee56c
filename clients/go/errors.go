// Package adk reads the error details the ADK servers attach to every non-OK status (see
// clients/README.md, "Errors"). The messages and gRPC stubs themselves are in package adkv1,
// generated from proto/adk/v1; this package adds only what grpc-go leaves to every caller:
// finding the google.rpc details among the status's Anys.
package adk

import (
	"time"

	adkv1 "github.com/adk-grpc/adk/clients/go/adkv1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// Domain is the ErrorInfo.domain of every ADK error.
const Domain = "adk.dev"

// ErrorInfo is the google.rpc.ErrorInfo of err's status, or nil when err is not a gRPC
// status error or carries none (e.g. a status made by the client itself, such as a deadline
// that passed before the server answered).
func ErrorInfo(err error) *errdetails.ErrorInfo {
	for _, d := range details(err) {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// Reason is the ErrorInfo reason of err ("SESSION_NOT_FOUND"), or "" when it has none. Compare
// it with the names of adkv1.ErrorReason, or use HasReason.
func Reason(err error) string {
	return ErrorInfo(err).GetReason()
}

// HasReason says whether err's ErrorInfo carries reason r.
func HasReason(err error, r adkv1.ErrorReason) bool {
	return err != nil && Reason(err) == r.String()
}

// RetryDelay is how long to wait before repeating the call, and whether the server says a
// retry may succeed at all (it sends a google.rpc.RetryInfo only then).
func RetryDelay(err error) (time.Duration, bool) {
	for _, d := range details(err) {
		if info, ok := d.(*errdetails.RetryInfo); ok {
			return info.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// Field is the request field an INVALID_ARGUMENT names ("app_name", "event.state_delta"),
// from the google.rpc.BadRequest's first field violation, or "" when there is none.
func Field(err error) string {
	for _, d := range details(err) {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

func details(err error) []interface{} {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	return st.Details()
}
