package dev.adk.client;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import com.google.protobuf.util.JsonFormat;
import dev.adk.v1.AgentRunnerGrpc;
import dev.adk.v1.AppendEventRequest;
import dev.adk.v1.AppendPrecondition;
import dev.adk.v1.ArtifactMetadata;
import dev.adk.v1.ArtifactRef;
import dev.adk.v1.ArtifactServiceGrpc;
import dev.adk.v1.Content;
import dev.adk.v1.CreateSessionRequest;
import dev.adk.v1.DownloadArtifactRequest;
import dev.adk.v1.DownloadArtifactResponse;
import dev.adk.v1.ErrorReason;
import dev.adk.v1.Event;
import dev.adk.v1.EventActions;
import dev.adk.v1.FunctionCall;
import dev.adk.v1.FunctionResponse;
import dev.adk.v1.GenerateMemoriesRequest;
import dev.adk.v1.GenerateMemoriesResponse;
import dev.adk.v1.GetSessionRequest;
import dev.adk.v1.GetUserStateRequest;
import dev.adk.v1.IngestEventsRequest;
import dev.adk.v1.IngestEventsResponse;
import dev.adk.v1.ListMemoryRevisionsRequest;
import dev.adk.v1.ListMemoryRevisionsResponse;
import dev.adk.v1.LoadArtifactRequest;
import dev.adk.v1.MemoryAction;
import dev.adk.v1.MemoryServiceGrpc;
import dev.adk.v1.Part;
import dev.adk.v1.RunConfig;
import dev.adk.v1.RunRequest;
import dev.adk.v1.SaveArtifactRequest;
import dev.adk.v1.SaveArtifactResponse;
import dev.adk.v1.SearchMemoryRequest;
import dev.adk.v1.SearchMemoryResponse;
import dev.adk.v1.Session;
import dev.adk.v1.SessionServiceGrpc;
import dev.adk.v1.StreamingMode;
import dev.adk.v1.UploadArtifactRequest;
import dev.adk.v1.UploadHeader;
import dev.adk.v1.WatchSessionRequest;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.Context;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * The Java client against the real adk-server (from $ADK_BIN_DIR, else
 * ${CARGO_TARGET_DIR:-target}/debug of the repository), with the example agents: the same
 * behaviours the Python, Node and Go suites assert. A plain main (no test framework is
 * needed offline): runs every static method named {@code test*}, or those named on the
 * command line, and exits non-zero when one fails.
 */
public final class ClientTests {
  static final Path REPO = Paths.get(System.getProperty("adk.repo", "../..")).toAbsolutePath().normalize();

  public static void main(String[] args) throws Exception {
    List<String> failed = new ArrayList<>();
    for (Method m : ClientTests.class.getDeclaredMethods()) {
      if (!m.getName().startsWith("test") || !Modifier.isStatic(m.getModifiers())
          || (args.length > 0 && !Arrays.asList(args).contains(m.getName()))) {
        continue;
      }
      long start = System.nanoTime();
      try {
        m.invoke(null);
        System.out.printf("ok   %s (%d ms)%n", m.getName(), (System.nanoTime() - start) / 1_000_000);
      } catch (java.lang.reflect.InvocationTargetException e) {
        failed.add(m.getName());
        System.out.printf("FAIL %s%n", m.getName());
        e.getCause().printStackTrace(System.out);
      }
    }
    if (!failed.isEmpty()) {
      System.out.println("failed: " + failed);
      System.exit(1);
    }
  }

  // --- the server -----------------------------------------------------------------------

  /** adk-server with the example agents and {@code args} on a free port, and a channel to it. */
  static final class Server implements AutoCloseable {
    final Process process;
    final String address;
    final ManagedChannel channel;
    final Path log;

    Server(String... args) throws Exception {
      String binDir = System.getenv("ADK_BIN_DIR");
      if (binDir == null) {
        String target = System.getenv().getOrDefault("CARGO_TARGET_DIR", REPO.resolve("target").toString());
        binDir = Paths.get(target).resolve("debug").toString();
      }
      int port;
      try (ServerSocket s = new ServerSocket(0)) {
        port = s.getLocalPort();
      }
      address = "127.0.0.1:" + port;
      List<String> cmd = new ArrayList<>(Arrays.asList(Paths.get(binDir, "adk-server").toString(),
          "--agents", REPO.resolve("examples/agents.yaml").toString(), "--listen", address, "--metrics-listen", "off"));
      cmd.addAll(Arrays.asList(args));
      log = Files.createTempFile("adk-server", ".log");
      process = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
      eventually("adk-server listens on " + address, 15_000, () -> {
        check(process.isAlive(), "adk-server exited: " + Files.readString(log));
        try (Socket s = new Socket("127.0.0.1", port)) {
          return true;
        } catch (java.io.IOException e) {
          return false;
        }
      });
      channel = ManagedChannelBuilder.forTarget(address).usePlaintext().build();
    }

    @Override
    public void close() throws Exception {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
      process.destroyForcibly().waitFor();
      Files.deleteIfExists(log);
    }
  }

  interface Condition {
    boolean holds() throws Exception;
  }

  /** Waits for {@code cond}, asking every 20 ms; fails naming {@code what} after {@code millis}. */
  static void eventually(String what, long millis, Condition cond) throws Exception {
    long end = System.nanoTime() + millis * 1_000_000;
    while (!cond.holds()) {
      check(System.nanoTime() < end, what + ": not within " + millis + " ms");
      Thread.sleep(20);
    }
  }

  // --- helpers ----------------------------------------------------------------------------

  static void check(boolean ok, Object what) {
    if (!ok) {
      throw new AssertionError(String.valueOf(what));
    }
  }

  static void checkEq(Object got, Object want, String what) {
    check(java.util.Objects.equals(got, want), what + ": got <" + got + ">, want <" + want + ">");
  }

  interface Call {
    void run() throws Exception;
  }

  /** The StatusRuntimeException {@code call} throws; fails unless it has {@code code} and {@code reason}. */
  static StatusRuntimeException expectReason(Status.Code code, ErrorReason reason, Call call) throws Exception {
    try {
      call.run();
    } catch (StatusRuntimeException e) {
      checkEq(e.getStatus().getCode(), code, "code of " + e);
      checkEq(AdkErrors.reason(e), reason.name(), "reason of " + e);
      check(AdkErrors.hasReason(e, reason), "hasReason");
      checkEq(AdkErrors.errorInfo(e).get().getDomain(), AdkErrors.DOMAIN, "domain");
      return e;
    }
    throw new AssertionError("no error, want " + code + " " + reason);
  }

  static String newUser() {
    return "java-" + UUID.randomUUID().toString().substring(0, 8);
  }

  static Content text(String role, String text) {
    return Content.newBuilder().setRole(role).addParts(Part.newBuilder().setText(text)).build();
  }

  static String textOf(Event e) {
    StringBuilder b = new StringBuilder();
    for (Part p : e.getContent().getPartsList()) {
      b.append(p.getText());
    }
    return b.toString();
  }

  static Struct struct(String json) throws Exception {
    Struct.Builder b = Struct.newBuilder();
    JsonFormat.parser().merge(json, b);
    return b.build();
  }

  static List<Event> all(Iterator<Event> events) {
    List<Event> out = new ArrayList<>();
    events.forEachRemaining(out::add);
    return out;
  }

  static SessionServiceGrpc.SessionServiceBlockingStub sessions(Channel ch) {
    return SessionServiceGrpc.newBlockingStub(ch).withDeadlineAfter(30, TimeUnit.SECONDS);
  }

  static ArtifactServiceGrpc.ArtifactServiceBlockingStub artifacts(Channel ch) {
    return ArtifactServiceGrpc.newBlockingStub(ch).withDeadlineAfter(30, TimeUnit.SECONDS);
  }

  static AgentRunnerGrpc.AgentRunnerBlockingStub runner(Channel ch) {
    return AgentRunnerGrpc.newBlockingStub(ch).withDeadlineAfter(30, TimeUnit.SECONDS);
  }

  // --- the tests --------------------------------------------------------------------------

  static void testSessionsKeepStateByScope() throws Exception {
    try (Server s = new Server()) {
      String user = newUser();
      Session created = sessions(s.channel).createSession(CreateSessionRequest.newBuilder()
          .setAppName("assistant").setUserId(user).setSessionId("a")
          .setState(struct("{\"user:name\": \"Alice\", \"temp:draft\": true, \"topic\": \"travel\", \"count\": 1}")).build());
      checkEq(created.getState(), struct("{\"user:name\": \"Alice\", \"topic\": \"travel\", \"count\": 1.0}"),
          "state (temp: dropped)");
      Session other = sessions(s.channel).createSession(CreateSessionRequest.newBuilder()
          .setAppName("assistant").setUserId(user).setSessionId("b").build());
      checkEq(other.getState(), struct("{\"user:name\": \"Alice\"}"), "another session's state");
      checkEq(sessions(s.channel).getUserState(GetUserStateRequest.newBuilder().setAppName("assistant").setUserId(user).build())
          .getState(), struct("{\"name\": \"Alice\"}"), "user state");
    }
  }

  static void testAppendEventHonoursItsPrecondition() throws Exception {
    try (Server s = new Server()) {
      String user = newUser();
      SessionServiceGrpc.SessionServiceBlockingStub sessions = sessions(s.channel);
      sessions.createSession(CreateSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s").build());
      AppendEventRequest.Builder req = AppendEventRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s");
      Event first = sessions.appendEvent(req.clone()
          .setEvent(Event.newBuilder().setAuthor("user").setContent(text("user", "first"))
              .setActions(EventActions.newBuilder().putStateDelta("topic", Value.newBuilder().setStringValue("first").build())))
          .setPrecondition(AppendPrecondition.newBuilder().setLastSequence(0)).build());
      checkEq(first.getSequence(), 1L, "first sequence");
      StatusRuntimeException stale = expectReason(Status.Code.ABORTED, ErrorReason.PRECONDITION_FAILED,
          () -> sessions.appendEvent(req.clone()
              .setEvent(Event.newBuilder().setAuthor("user").setContent(text("user", "stale"))
                  .setActions(EventActions.newBuilder().putStateDelta("topic", Value.newBuilder().setStringValue("stale").build())))
              .setPrecondition(AppendPrecondition.newBuilder().setLastSequence(0)).build()));
      check(AdkErrors.retryDelay(stale).isEmpty(), "PRECONDITION_FAILED carries no RetryInfo");
      Event second = sessions.appendEvent(req.clone()
          .setEvent(Event.newBuilder().setAuthor("user").setContent(text("user", "second")))
          .setPrecondition(AppendPrecondition.newBuilder().setLastEventId(first.getId())).build());
      checkEq(second.getSequence(), 2L, "sequence after the last event id");
      Session got = sessions.getSession(GetSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s").build());
      checkEq(got.getEventsCount(), 2, "events");
      checkEq(got.getState().getFieldsOrThrow("topic").getStringValue(), "first", "the stale delta is not applied");
    }
  }

  static void testArtifactsUnaryAndStreamed() throws Exception {
    try (Server s = new Server()) {
      String user = newUser();
      ArtifactServiceGrpc.ArtifactServiceBlockingStub artifacts = artifacts(s.channel);
      ArtifactRef ref = ArtifactRef.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s").setFileName("notes.txt").build();
      for (String body : new String[] {"v one", "v two"}) {
        artifacts.saveArtifact(SaveArtifactRequest.newBuilder().setRef(ref).setPart(Part.newBuilder().setText(body)).build());
      }
      checkEq(artifacts.loadArtifact(LoadArtifactRequest.newBuilder().setRef(ref).setVersion(1).build()).getPart().getText(), "v one", "v1");
      checkEq(artifacts.loadArtifact(LoadArtifactRequest.newBuilder().setRef(ref).build()).getVersion(), 2L, "latest version");

      // 6 MiB, more than one unary message may carry, up in 64 KiB chunks and down again.
      byte[] data = new byte[6 << 20];
      new Random(7).nextBytes(data);
      ArtifactRef big = ref.toBuilder().setFileName("big.bin").build();
      CompletableFuture<SaveArtifactResponse> saved = new CompletableFuture<>();
      StreamObserver<UploadArtifactRequest> up = ArtifactServiceGrpc.newStub(s.channel).withDeadlineAfter(30, TimeUnit.SECONDS)
          .uploadArtifact(new StreamObserver<SaveArtifactResponse>() {
            @Override public void onNext(SaveArtifactResponse r) { saved.complete(r); }
            @Override public void onError(Throwable t) { saved.completeExceptionally(t); }
            @Override public void onCompleted() {}
          });
      up.onNext(UploadArtifactRequest.newBuilder().setHeader(UploadHeader.newBuilder().setRef(big)
          .setMimeType("application/octet-stream").setSizeBytes(data.length)).build());
      for (int off = 0; off < data.length; off += 64 << 10) {
        up.onNext(UploadArtifactRequest.newBuilder().setChunk(ByteString.copyFrom(data, off, Math.min(64 << 10, data.length - off))).build());
      }
      up.onCompleted();
      checkEq(saved.get(30, TimeUnit.SECONDS).getVersion(), 1L, "uploaded version");
      Iterator<DownloadArtifactResponse> down = artifacts.downloadArtifact(DownloadArtifactRequest.newBuilder().setRef(big).build());
      ByteArrayOutputStream got = new ByteArrayOutputStream();
      ArtifactMetadata meta = null;
      int chunks = 0;
      while (down.hasNext()) {
        DownloadArtifactResponse m = down.next();
        if (m.hasMetadata()) {
          meta = m.getMetadata();
        } else {
          m.getChunk().writeTo(got);
          chunks++;
        }
      }
      check(meta != null && meta.getSizeBytes() == data.length && chunks > 1, "download: " + meta + ", " + chunks + " chunks");
      check(Arrays.equals(got.toByteArray(), data), "the downloaded bytes are the uploaded ones");
      expectReason(Status.Code.RESOURCE_EXHAUSTED, ErrorReason.LIMIT_EXCEEDED,
          () -> artifacts.loadArtifact(LoadArtifactRequest.newBuilder().setRef(big).build()));
    }
  }

  static void testStreamedRunWithPartialEventsAndAClientTool() throws Exception {
    try (Server s = new Server()) {
      String user = newUser();
      StringBuilder partial = new StringBuilder();
      int partials = 0;
      Event last = null;
      for (Event e : all(runner(s.channel).run(RunRequest.newBuilder().setAppName("assistant").setUserId(user)
          .setSessionId("s").setCreateSession(true).setNewMessage(text("user", "Hello, agent!"))
          .setRunConfig(RunConfig.newBuilder().setStreamingMode(StreamingMode.STREAMING_MODE_SSE)).build()))) {
        if (e.getPartial()) {
          partials++;
          partial.append(textOf(e));
          checkEq(e.getSequence(), 0L, "a partial event's sequence (never stored)");
        } else if (e.getAuthor().equals("assistant")) {
          last = e;
        }
      }
      check(partials >= 2, partials + " partial events");
      checkEq(partial.toString(), "You said: Hello, agent!", "the partial events' text");
      checkEq(textOf(last), "You said: Hello, agent!", "the final event");
      check(last.getSequence() > 0, "the final event is stored");

      FunctionCall call = null;
      for (Event e : all(runner(s.channel).run(RunRequest.newBuilder().setAppName("trip_planner").setUserId(user)
          .setSessionId("trip").setCreateSession(true).setNewMessage(text("user", "Two nights at Hotel Sakura")).build()))) {
        for (Part p : e.getContent().getPartsList()) {
          if (p.hasFunctionCall() && e.getLongRunningToolIdsList().equals(List.of(p.getFunctionCall().getId()))) {
            call = p.getFunctionCall();
          }
        }
      }
      check(call != null && call.getName().equals("confirm_booking"), "a long-running confirm_booking call: " + call);
      checkEq(JsonFormat.printer().omittingInsignificantWhitespace().print(call.getArgs()),
          "{\"hotel\":\"Hotel Sakura\",\"nights\":2.0}", "its arguments");
      Value answer = Value.newBuilder().setStructValue(struct("{\"confirmed\": true}")).build();
      List<String> replies = new ArrayList<>();
      for (Event e : all(runner(s.channel).run(RunRequest.newBuilder().setAppName("trip_planner").setUserId(user).setSessionId("trip")
          .setNewMessage(Content.newBuilder().setRole("user").addParts(Part.newBuilder().setFunctionResponse(
              FunctionResponse.newBuilder().setName(call.getName()).setId(call.getId()).setResponse(answer)))).build()))) {
        if (!textOf(e).isEmpty()) {
          replies.add(e.getAuthor() + ": " + textOf(e));
        }
      }
      check(!replies.isEmpty(), "replies after the function_response");
      checkEq(replies.get(replies.size() - 1), "booker: Booked: 2 nights at Hotel Sakura.", "the last reply");
    }
  }

  static void testWatchSessionResumesFromASequence() throws Exception {
    try (Server s = new Server()) {
      String user = newUser();
      SessionServiceGrpc.SessionServiceBlockingStub sessions = sessions(s.channel);
      sessions.createSession(CreateSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s").build());
      AppendEventRequest.Builder req = AppendEventRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s");
      for (String t : new String[] {"one", "two", "three"}) {
        sessions.appendEvent(req.clone().setEvent(Event.newBuilder().setAuthor("user").setContent(text("user", t))).build());
      }
      Context.CancellableContext watching = Context.current().withCancellation();
      try {
        Iterator<Event> watch = watching.call(() -> SessionServiceGrpc.newBlockingStub(s.channel)
            .watchSession(WatchSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s")
                .setAfterSequence(1).build()));
        Event e = watch.next();
        checkEq(e.getSequence() + " " + textOf(e), "2 two", "first watched event");
        e = watch.next();
        checkEq(e.getSequence() + " " + textOf(e), "3 three", "second watched event");
        sessions.appendEvent(req.clone().setEvent(Event.newBuilder().setAuthor("user").setContent(text("user", "four"))).build());
        e = watch.next();
        checkEq(e.getSequence() + " " + textOf(e), "4 four", "the live event");
      } finally {
        watching.cancel(null);
      }
    }
  }

  static void testErrorDetailsByReason() throws Exception {
    try (Server s = new Server("--max-watches", "1")) {
      String user = newUser();
      SessionServiceGrpc.SessionServiceBlockingStub sessions = sessions(s.channel);
      expectReason(Status.Code.NOT_FOUND, ErrorReason.SESSION_NOT_FOUND, () -> sessions.getSession(
          GetSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("nope").build()));
      StatusRuntimeException bad = expectReason(Status.Code.INVALID_ARGUMENT, ErrorReason.INVALID_ARGUMENT,
          () -> sessions.createSession(CreateSessionRequest.newBuilder().setAppName("not\tvalid").setUserId(user).build()));
      checkEq(AdkErrors.field(bad), "app_name", "BadRequest field");
      sessions.createSession(CreateSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s").build());
      expectReason(Status.Code.ALREADY_EXISTS, ErrorReason.SESSION_ALREADY_EXISTS, () -> sessions.createSession(
          CreateSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s").build()));
      expectReason(Status.Code.NOT_FOUND, ErrorReason.ARTIFACT_NOT_FOUND, () -> artifacts(s.channel).loadArtifact(
          LoadArtifactRequest.newBuilder().setRef(ArtifactRef.newBuilder().setAppName("assistant").setUserId(user)
              .setSessionId("s").setFileName("none.txt")).build()));
      expectReason(Status.Code.NOT_FOUND, ErrorReason.APP_NOT_FOUND, () -> runner(s.channel).run(RunRequest.newBuilder()
          .setAppName("no_such_app").setUserId(user).setSessionId("s").setNewMessage(text("user", "hi")).build()).hasNext());

      // A concurrency quota (one watch here) frees up as other calls end: RetryInfo says when.
      CompletableFuture<Metadata> headers = new CompletableFuture<>();
      ClientInterceptor seeHeaders = new ClientInterceptor() {
        @Override
        public <Q, A> ClientCall<Q, A> interceptCall(MethodDescriptor<Q, A> m, CallOptions o, Channel next) {
          return new ForwardingClientCall.SimpleForwardingClientCall<Q, A>(next.newCall(m, o)) {
            @Override
            public void start(Listener<A> listener, Metadata h) {
              super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<A>(listener) {
                @Override
                public void onHeaders(Metadata received) {
                  headers.complete(received);
                  super.onHeaders(received);
                }
              }, h);
            }
          };
        }
      };
      Context.CancellableContext watching = Context.current().withCancellation();
      try {
        // The async stub: a blocking stub delivers the headers only when its iterator is read.
        watching.run(() -> SessionServiceGrpc.newStub(ClientInterceptors.intercept(s.channel, seeHeaders))
            .watchSession(WatchSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s").build(),
                new StreamObserver<Event>() {
                  @Override public void onNext(Event e) {}
                  @Override public void onError(Throwable t) {}
                  @Override public void onCompleted() {}
                }));
        // Its response headers come once the server's handler has taken the quota.
        headers.get(10, TimeUnit.SECONDS);
        StatusRuntimeException busy = expectReason(Status.Code.RESOURCE_EXHAUSTED, ErrorReason.LIMIT_EXCEEDED,
            () -> sessions.watchSession(WatchSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s").build()).hasNext());
        checkEq(AdkErrors.errorInfo(busy).get().getMetadataOrThrow("limit"), "max_watches", "the limit");
        check(AdkErrors.retryDelay(busy).map(d -> !d.isZero() && !d.isNegative()).orElse(false), "RetryInfo: " + AdkErrors.retryDelay(busy));
      } finally {
        watching.cancel(null);
      }
    }
  }

  static void testCompressedRequestsAndResponses() throws Exception {
    try (Server s = new Server()) {
      String user = newUser();
      List<String> encodings = new CopyOnWriteArrayList<>();
      Metadata.Key<String> grpcEncoding = Metadata.Key.of("grpc-encoding", Metadata.ASCII_STRING_MARSHALLER);
      // Every request gzip-compressed; grpc-java accepts gzip answers by default. The interceptor
      // records how each answer came.
      ClientInterceptor gzipAndSee = new ClientInterceptor() {
        @Override
        public <Q, A> ClientCall<Q, A> interceptCall(MethodDescriptor<Q, A> m, CallOptions o, Channel next) {
          return new ForwardingClientCall.SimpleForwardingClientCall<Q, A>(next.newCall(m, o.withCompression("gzip"))) {
            @Override
            public void start(Listener<A> listener, Metadata h) {
              super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<A>(listener) {
                @Override
                public void onHeaders(Metadata received) {
                  encodings.add(String.valueOf(received.get(grpcEncoding)));
                  super.onHeaders(received);
                }
              }, h);
            }
          };
        }
      };
      Channel ch = ClientInterceptors.intercept(s.channel, gzipAndSee);
      String notes = "the quick brown fox jumps over the lazy dog; ".repeat(400);
      Struct state = Struct.newBuilder().putFields("notes", Value.newBuilder().setStringValue(notes).build()).build();
      sessions(ch).createSession(CreateSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s").setState(state).build());
      encodings.clear();
      Session got = sessions(ch).getSession(GetSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setSessionId("s").build());
      checkEq(got.getState(), state, "the state sent and read compressed");
      checkEq(encodings, List.of("gzip"), "how the big answer came");
      artifacts(ch).saveArtifact(SaveArtifactRequest.newBuilder().setRef(ArtifactRef.newBuilder().setAppName("assistant")
          .setUserId(user).setSessionId("s").setFileName("n.txt")).setPart(Part.newBuilder().setText(notes)).build());
      List<Event> events = all(runner(ch).run(RunRequest.newBuilder().setAppName("assistant").setUserId(user)
          .setSessionId("s").setNewMessage(text("user", "Hello, gzip!")).build()));
      checkEq(textOf(events.get(events.size() - 1)), "You said: Hello, gzip!", "a run over gzip");
    }
  }
  /**
   * A server given a generation model (an OpenAI-compatible fake whose every answer extracts one
   * fact): IngestEvents buffers an event once and a flush generates its fact, which SearchMemory
   * finds and ListMemoryRevisions lists; GenerateMemories of the same event again changes nothing.
   */
  static void testIngestedEventsBecomeFactsWithRevisions() throws Exception {
    String facts = "{\\\"facts\\\":[{\\\"fact\\\":\\\"The user likes window seats\\\","
        + "\\\"topics\\\":[\\\"USER_PREFERENCES\\\"]}]}";
    byte[] reply = ("{\"id\":\"c\",\"object\":\"chat.completion\",\"created\":0,\"model\":\"fake\","
        + "\"choices\":[{\"index\":0,\"finish_reason\":\"stop\",\"message\":{\"role\":\"assistant\",\"content\":\""
        + facts + "\"}}]}").getBytes(java.nio.charset.StandardCharsets.UTF_8);
    com.sun.net.httpserver.HttpServer model =
        com.sun.net.httpserver.HttpServer.create(new java.net.InetSocketAddress("127.0.0.1", 0), 0);
    model.createContext("/", exchange -> {
      exchange.getRequestBody().readAllBytes();
      exchange.getResponseHeaders().set("content-type", "application/json");
      exchange.sendResponseHeaders(200, reply.length);
      exchange.getResponseBody().write(reply);
      exchange.close();
    });
    model.start();
    Path generation = Files.createTempFile("generation", ".yaml");
    Files.writeString(generation, "'*':\n  model: { provider: openai, model: fake, base_url: 'http://127.0.0.1:"
        + model.getAddress().getPort() + "/v1' }\n");
    try (Server s = new Server("--memory-generation", generation.toString())) {
      MemoryServiceGrpc.MemoryServiceBlockingStub memory =
          MemoryServiceGrpc.newBlockingStub(s.channel).withDeadlineAfter(30, TimeUnit.SECONDS);
      String user = newUser();
      Event said = Event.newBuilder().setId("e1").setAuthor("user").setContent(text("user", "I like window seats")).build();
      IngestEventsRequest ingest = IngestEventsRequest.newBuilder()
          .setAppName("app").setUserId(user).setStreamId("s1").addEvents(said).build();
      checkEq(memory.ingestEvents(ingest).getBufferedEvents(), 1L, "buffered");
      checkEq(memory.ingestEvents(ingest).getBufferedEvents(), 1L, "an event ingested again is buffered once");
      IngestEventsResponse flushed = memory.ingestEvents(
          IngestEventsRequest.newBuilder().setAppName("app").setUserId(user).setForceFlush(true).build());
      checkEq(flushed.getBufferedEvents(), 0L, "buffered after a flush");
      checkEq(flushed.getMemoriesCount(), 1, "generated");
      checkEq(flushed.getMemories(0).getAction(), MemoryAction.MEMORY_ACTION_CREATED, "action");
      checkEq(flushed.getMemories(0).getMemory().getFact().getSourceEventIdsList(), List.of("e1"), "sources");
      SearchMemoryResponse found = memory.searchMemory(
          SearchMemoryRequest.newBuilder().setAppName("app").setUserId(user).setQuery("window seats").build());
      checkEq(found.getMemoriesCount(), 1, "found");
      checkEq(found.getMemories(0).getAuthor(), "user", "author");
      ListMemoryRevisionsResponse revisions = memory.listMemoryRevisions(ListMemoryRevisionsRequest.newBuilder()
          .setAppName("app").setUserId(user).setMemoryId(found.getMemories(0).getId()).build());
      checkEq(revisions.getRevisionsCount(), 1, "revisions");
      checkEq(revisions.getRevisions(0).getFact(), "The user likes window seats", "revision's fact");
      GenerateMemoriesResponse again = memory.generateMemories(
          GenerateMemoriesRequest.newBuilder().setAppName("app").setUserId(user).addEvents(said).build());
      checkEq(again.getMemoriesCount(), 0, "a generation of events generated from before");
    } finally {
      model.stop(0);
      Files.deleteIfExists(generation);
    }
  }
}
