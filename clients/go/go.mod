module github.com/adk-grpc/adk/clients/go

go 1.19

// The oldest releases this module is checked with: Debian 12's packages (golang-google-grpc-dev,
// golang-google-protobuf-dev, golang-google-genproto-dev). Newer releases work the same way.
require (
	google.golang.org/genproto v0.0.0-20200526211855-cb27e3aa2013
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
