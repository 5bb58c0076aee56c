package dev.adk.examples;

import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import com.google.protobuf.util.JsonFormat;
import dev.adk.client.AdkErrors;
import dev.adk.v1.AgentRunnerGrpc;
import dev.adk.v1.AppendEventRequest;
import dev.adk.v1.AppendPrecondition;
import dev.adk.v1.ArtifactRef;
import dev.adk.v1.ArtifactServiceGrpc;
import dev.adk.v1.Content;
import dev.adk.v1.CreateSessionRequest;
import dev.adk.v1.Event;
import dev.adk.v1.EventActions;
import dev.adk.v1.FunctionCall;
import dev.adk.v1.FunctionResponse;
import dev.adk.v1.GetSessionRequest;
import dev.adk.v1.LoadArtifactRequest;
import dev.adk.v1.LoadArtifactResponse;
import dev.adk.v1.Part;
import dev.adk.v1.RunConfig;
import dev.adk.v1.RunRequest;
import dev.adk.v1.SaveArtifactRequest;
import dev.adk.v1.Session;
import dev.adk.v1.SessionServiceGrpc;
import dev.adk.v1.StreamingMode;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.StatusRuntimeException;
import java.util.Iterator;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * A tour of the ADK services from Java, on the generated stubs (package dev.adk.v1) and
 * grpc-java. Start a server first (from the repository root):
 *
 * <pre>cargo run --profile quick --bin adk-server -- --agents examples/agents.yaml</pre>
 *
 * then, from clients/java: {@code ./build.sh && java @build/java.args dev.adk.examples.Quickstart
 * [localhost:50051]}. Every run uses a user of its own, so it prints the same tour however often
 * it runs.
 */
public final class Quickstart {
  public static void main(String[] args) throws Exception {
    String target = args.length > 0 ? args[0] : "localhost:50051";
    ManagedChannel channel = ManagedChannelBuilder.forTarget(target).usePlaintext().build();
    try {
      tour(channel);
    } finally {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  static void tour(ManagedChannel channel) throws Exception {
    // Every call gets a deadline: blocking stubs have none by default.
    SessionServiceGrpc.SessionServiceBlockingStub sessions =
        SessionServiceGrpc.newBlockingStub(channel).withDeadlineAfter(1, TimeUnit.MINUTES);
    ArtifactServiceGrpc.ArtifactServiceBlockingStub artifacts =
        ArtifactServiceGrpc.newBlockingStub(channel).withDeadlineAfter(1, TimeUnit.MINUTES);
    AgentRunnerGrpc.AgentRunnerBlockingStub runner =
        AgentRunnerGrpc.newBlockingStub(channel).withDeadlineAfter(1, TimeUnit.MINUTES);
    String user = "alice-" + UUID.randomUUID().toString().substring(0, 6); // a fresh user, so the tour can run again

    // A session with state in every scope: temp: is dropped, the rest merged.
    Struct.Builder state = Struct.newBuilder();
    JsonFormat.parser().merge("{\"user:name\": \"Alice\", \"temp:draft\": true}", state);
    Session session = sessions.createSession(
        CreateSessionRequest.newBuilder().setAppName("assistant").setUserId(user).setState(state).build());
    System.out.println("session " + session.getId() + ": state " + json(session.getState()));

    // An event with a state delta, applied atomically with the append, if nobody appended since
    // we looked (sequence 0: the session has no events yet).
    Event event = sessions.appendEvent(AppendEventRequest.newBuilder()
        .setAppName("assistant").setUserId(user).setSessionId(session.getId())
        .setEvent(Event.newBuilder().setAuthor("user").setContent(text("user", "Note this."))
            .setActions(EventActions.newBuilder().putStateDelta("topic", Value.newBuilder().setStringValue("demo").build())))
        .setPrecondition(AppendPrecondition.newBuilder().setLastSequence(0))
        .build());
    System.out.println("appended event #" + event.getSequence() + " (" + event.getId() + ")");

    // Artifacts are versioned; user: names are shared by all of the user's sessions.
    ArtifactRef ref = ArtifactRef.newBuilder().setAppName("assistant").setUserId(user)
        .setSessionId(session.getId()).setFileName("user:notes.md").build();
    for (String body : new String[] {"# Notes\n", "# Notes\n- more\n"}) {
      long version = artifacts.saveArtifact(SaveArtifactRequest.newBuilder().setRef(ref)
          .setPart(Part.newBuilder().setText(body)).build()).getVersion();
      System.out.println("saved version " + version);
    }
    LoadArtifactResponse latest = artifacts.loadArtifact(LoadArtifactRequest.newBuilder().setRef(ref).build());
    System.out.println("latest is v" + latest.getVersion() + ": " + latest.getPart().getText().replace("\n", "\\n"));

    // Run the agent and print the reply as it streams (SSE: partial events, then the whole).
    System.out.print("assistant: ");
    Iterator<Event> events = runner.run(RunRequest.newBuilder()
        .setAppName("assistant").setUserId(user).setSessionId(session.getId())
        .setNewMessage(text("user", "Hello, agent!"))
        .setRunConfig(RunConfig.newBuilder().setStreamingMode(StreamingMode.STREAMING_MODE_SSE))
        .build());
    while (events.hasNext()) {
      Event e = events.next();
      if (e.getPartial()) {
        System.out.print(textOf(e));
      }
    }
    System.out.println();
    Session after = sessions.getSession(GetSessionRequest.newBuilder()
        .setAppName("assistant").setUserId(user).setSessionId(session.getId()).build());
    System.out.println("last_reply in state: " + after.getState().getFieldsOrThrow("last_reply").getStringValue());

    // A client tool: the run pauses with a call for us to answer (its id is in the event's
    // long_running_tool_ids); a function_response with that id resumes it.
    RunRequest request = RunRequest.newBuilder().setAppName("trip_planner").setUserId(user)
        .setSessionId("trip").setCreateSession(true).setNewMessage(text("user", "Two nights at Hotel Sakura")).build();
    while (request != null) {
      Iterator<Event> stream = runner.run(request);
      request = null;
      while (stream.hasNext()) {
        Event e = stream.next();
        if (!textOf(e).isEmpty()) {
          System.out.println(e.getAuthor() + ": " + textOf(e));
        }
        for (Part p : e.getContent().getPartsList()) {
          FunctionCall call = p.getFunctionCall();
          if (!p.hasFunctionCall() || !e.getLongRunningToolIdsList().contains(call.getId())) {
            continue;
          }
          System.out.println("the agent asks: " + call.getName() + "(" + json(call.getArgs()) + ") -> confirming");
          Value.Builder answer = Value.newBuilder();
          JsonFormat.parser().merge("{\"confirmed\": true}", answer);
          request = RunRequest.newBuilder().setAppName("trip_planner").setUserId(user).setSessionId("trip")
              .setNewMessage(Content.newBuilder().setRole("user").addParts(Part.newBuilder().setFunctionResponse(
                  FunctionResponse.newBuilder().setName(call.getName()).setId(call.getId()).setResponse(answer))))
              .build();
        }
      }
    }

    // Errors carry the server's reason and the request field at fault (AdkErrors reads them).
    try {
      sessions.createSession(CreateSessionRequest.newBuilder().setAppName("not\tvalid").setUserId(user).build());
    } catch (StatusRuntimeException e) {
      System.out.println("invalid input -> code " + e.getStatus().getCode() + " " + AdkErrors.reason(e) + " "
          + AdkErrors.field(e) + ": " + e.getStatus().getDescription());
    }
  }

  static Content text(String role, String text) {
    return Content.newBuilder().setRole(role).addParts(Part.newBuilder().setText(text)).build();
  }

  /** The text of an event's parts, thoughts left out. */
  static String textOf(Event e) {
    StringBuilder b = new StringBuilder();
    for (Part p : e.getContent().getPartsList()) {
      if (!p.getThought()) {
        b.append(p.getText());
      }
    }
    return b.toString();
  }

  static String json(com.google.protobuf.MessageOrBuilder m) throws Exception {
    return JsonFormat.printer().omittingInsignificantWhitespace().print(m);
  }
}
