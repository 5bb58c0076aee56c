// A tour of the ADK services from Go, on the generated stubs (package adkv1) and grpc-go.
//
// Start a server first (from the repository root):
//
//	cargo run --profile quick --bin adk-server -- --agents examples/agents.yaml
//
// then, from clients/go: go run ./examples/quickstart [localhost:50051]
// Every run uses a user of its own, so it prints the same tour however often it runs.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	adk "github.com/adk-grpc/adk/clients/go"
	adkv1 "github.com/adk-grpc/adk/clients/go/adkv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

func main() {
	target := "localhost:50051"
	if len(os.Args) > 1 {
		target = os.Args[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// grpc.Dial and WithInsecure: grpc-go 1.33 (Debian 12) has them; newer releases also
	// spell them grpc.NewClient and grpc.WithTransportCredentials(insecure.NewCredentials()).
	conn, err := grpc.Dial(target, grpc.WithInsecure())
	check(err)
	defer conn.Close()
	sessions := adkv1.NewSessionServiceClient(conn)
	artifacts := adkv1.NewArtifactServiceClient(conn)
	runner := adkv1.NewAgentRunnerClient(conn)
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	user := "alice-" + hex.EncodeToString(suffix) // a fresh user, so the tour can run again and again

	// A session with state in every scope: temp: is dropped, the rest merged.
	state, err := structpb.NewStruct(map[string]interface{}{"user:name": "Alice", "temp:draft": true})
	check(err)
	s, err := sessions.CreateSession(ctx, &adkv1.CreateSessionRequest{AppName: "assistant", UserId: user, State: state})
	check(err)
	fmt.Printf("session %s: state %v\n", s.Id, s.State.AsMap())

	// An event with a state delta, applied atomically with the append, if nobody appended
	// since we looked (sequence 0: the session has no events yet).
	topic, _ := structpb.NewValue("demo")
	ev, err := sessions.AppendEvent(ctx, &adkv1.AppendEventRequest{
		AppName: "assistant", UserId: user, SessionId: s.Id,
		Event:        &adkv1.Event{Author: "user", Content: text("user", "Note this."), Actions: &adkv1.EventActions{StateDelta: map[string]*structpb.Value{"topic": topic}}},
		Precondition: &adkv1.AppendPrecondition{Expected: &adkv1.AppendPrecondition_LastSequence{LastSequence: 0}},
	})
	check(err)
	fmt.Printf("appended event #%d (%s)\n", ev.Sequence, ev.Id)

	// Artifacts are versioned; user: names are shared by all of the user's sessions.
	ref := &adkv1.ArtifactRef{AppName: "assistant", UserId: user, SessionId: s.Id, FileName: "user:notes.md"}
	for _, body := range []string{"# Notes\n", "# Notes\n- more\n"} {
		saved, err := artifacts.SaveArtifact(ctx, &adkv1.SaveArtifactRequest{Ref: ref, Part: &adkv1.Part{Kind: &adkv1.Part_Text{Text: body}}})
		check(err)
		fmt.Printf("saved version %d\n", saved.Version)
	}
	latest, err := artifacts.LoadArtifact(ctx, &adkv1.LoadArtifactRequest{Ref: ref})
	check(err)
	fmt.Printf("latest is v%d: %q\n", latest.Version, latest.Part.GetText())

	// Run the agent and print the reply as it streams (SSE: partial events, then the whole).
	fmt.Print("assistant: ")
	events, err := runner.Run(ctx, &adkv1.RunRequest{
		AppName: "assistant", UserId: user, SessionId: s.Id, NewMessage: text("user", "Hello, agent!"),
		RunConfig: &adkv1.RunConfig{StreamingMode: adkv1.StreamingMode_STREAMING_MODE_SSE},
	})
	check(err)
	each(events, func(e *adkv1.Event) {
		if e.GetPartial() {
			fmt.Print(textOf(e))
		}
	})
	fmt.Println()
	got, err := sessions.GetSession(ctx, &adkv1.GetSessionRequest{AppName: "assistant", UserId: user, SessionId: s.Id})
	check(err)
	fmt.Printf("last_reply in state: %q\n", got.State.AsMap()["last_reply"])

	// A client tool: the run pauses with a call for us to answer (its id is in the event's
	// long_running_tool_ids); a function_response with that id resumes it.
	req := &adkv1.RunRequest{AppName: "trip_planner", UserId: user, SessionId: "trip", CreateSession: true,
		NewMessage: text("user", "Two nights at Hotel Sakura")}
	for req != nil {
		stream, err := runner.Run(ctx, req)
		check(err)
		req = nil
		each(stream, func(e *adkv1.Event) {
			if t := textOf(e); t != "" {
				fmt.Printf("%s: %s\n", e.Author, t)
			}
			for _, p := range e.GetContent().GetParts() {
				call := p.GetFunctionCall()
				if call == nil || !contains(e.LongRunningToolIds, call.GetId()) {
					continue
				}
				fmt.Printf("the agent asks: %s(%v) -> confirming\n", call.Name, call.Args.GetStructValue().AsMap())
				answer, _ := structpb.NewValue(map[string]interface{}{"confirmed": true})
				req = &adkv1.RunRequest{AppName: "trip_planner", UserId: user, SessionId: "trip",
					NewMessage: &adkv1.Content{Role: "user", Parts: []*adkv1.Part{{Kind: &adkv1.Part_FunctionResponse{
						FunctionResponse: &adkv1.FunctionResponse{Name: call.Name, Id: call.Id, Response: answer}}}}}}
			}
		})
	}

	// Errors carry the server's reason and the request field at fault (package adk reads them).
	_, err = sessions.CreateSession(ctx, &adkv1.CreateSessionRequest{AppName: "not\tvalid", UserId: user})
	fmt.Printf("invalid input -> code %s %s %s: %s\n", status.Code(err), adk.Reason(err), adk.Field(err), status.Convert(err).Message())
}

func text(role, t string) *adkv1.Content {
	return &adkv1.Content{Role: role, Parts: []*adkv1.Part{{Kind: &adkv1.Part_Text{Text: t}}}}
}

// textOf is the text of an event's parts, thoughts left out.
func textOf(e *adkv1.Event) string {
	var b strings.Builder
	for _, p := range e.GetContent().GetParts() {
		if !p.GetThought() {
			b.WriteString(p.GetText())
		}
	}
	return b.String()
}

// each calls f with every event of a Run, as it arrives.
func each(stream adkv1.AgentRunner_RunClient, f func(*adkv1.Event)) {
	for {
		e, err := stream.Recv()
		if err == io.EOF {
			return
		}
		check(err)
		f(e)
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func check(err error) {
	if err != nil {
		log.Fatalf("%v (reason %q)", err, adk.Reason(err))
	}
}
