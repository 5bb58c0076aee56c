#!/usr/bin/env bash
# Builds the Java client with Debian 12's packages (scripts/setup-go-java.sh installs them),
# offline: protoc and grpc_java_plugin generate the messages and stubs of proto/adk/v1 (and
# this client's copy of the google.rpc error details) into build/gen, javac compiles them
# with src/main/java, the examples and the tests into build/classes, and build/java.args gets
# the class path, for `java @build/java.args <class> …`. Skips the work when nothing changed.
set -euo pipefail
cd "$(dirname "$0")"
here=$PWD
protos=$here/../../proto
plugin=${PROTOC_GEN_GRPC_JAVA:-$(command -v protoc-gen-grpc-java || command -v grpc_java_plugin || true)}
[ -n "$plugin" ] || { echo "build.sh: no protoc-gen-grpc-java (Debian: apt-get install protobuf-compiler-grpc-java-plugin)" >&2; exit 1; }

# grpc-java 1.41 and what it needs at run time (Debian's libgrpc-java declares none of it), and
# javax.annotation.Generated, which the generated stubs carry and Java 11+ lacks.
jars=(grpc-api grpc-context grpc-core grpc-netty grpc-protobuf grpc-protobuf-lite grpc-stub
  protobuf protobuf-util proto-google-common-protos guava gson perfmark-api
  netty-buffer netty-codec netty-codec-http netty-codec-http2 netty-codec-socks netty-common
  netty-handler netty-handler-proxy netty-resolver netty-transport geronimo-annotation-1.3-spec)
classpath=$here/build/classes
for jar in "${jars[@]}"; do
  [ -f "/usr/share/java/$jar.jar" ] || { echo "build.sh: /usr/share/java/$jar.jar is missing: run scripts/setup-go-java.sh" >&2; exit 1; }
  classpath+=:/usr/share/java/$jar.jar
done

stamp=build/.built
if [ -f "$stamp" ] && [ -z "$(find "$protos/adk/v1" src examples build.sh -newer "$stamp" -type f | head -1)" ]; then
  exit 0
fi
rm -rf build
mkdir -p build/gen build/classes
protoc -I "$protos" -I src/main/proto --java_out=build/gen \
  --plugin=protoc-gen-grpc-java="$plugin" --grpc-java_out=build/gen \
  "$protos"/adk/v1/*.proto src/main/proto/adk/client/error_details.proto
find build/gen src/main/java examples src/test/java -name '*.java' >build/sources.txt
# One javac run is too short for the optimising JIT to pay off: C1 only halves the build.
javac -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC -nowarn -encoding UTF-8 --release 11 -d build/classes -cp "$classpath" @build/sources.txt
echo "-cp $classpath" >build/java.args
touch "$stamp"
