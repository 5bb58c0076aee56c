// Package adkv1 is the Go code generated from proto/adk/v1 (messages and gRPC stubs of
// package adk.v1). It is not committed: `go generate ./...` in clients/go writes it, with
// protoc and the protoc-gen-go and protoc-gen-go-grpc plugins on PATH.
package adkv1

// module= strips the protos' go_package (github.com/adk-grpc/adk/gen/go/adk/v1), so the files
// land here, whatever this package's import path.
//go:generate protoc -I ../../../proto --go_out=. --go_opt=module=github.com/adk-grpc/adk/gen/go/adk/v1 --go-grpc_out=. --go-grpc_opt=module=github.com/adk-grpc/adk/gen/go/adk/v1 adk/v1/content.proto adk/v1/event.proto adk/v1/session.proto adk/v1/artifact.proto adk/v1/memory.proto adk/v1/runner.proto adk/v1/errors.proto
