// The Go client against the real adk-server (from $ADK_BIN_DIR, else
// ${CARGO_TARGET_DIR:-target}/debug of the repository), with the example agents: the same
// behaviours the Python and Node suites assert.
package adk_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	adk "github.com/adk-grpc/adk/clients/go"
	adkv1 "github.com/adk-grpc/adk/clients/go/adkv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

var repo, _ = filepath.Abs("../..")

// server is a running adk-server and a connection to it.
type server struct {
	addr string
	conn *grpc.ClientConn
}

// startServer starts adk-server with the example agents and args on a free port, and stops
// it when the test ends.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	bin := os.Getenv("ADK_BIN_DIR")
	if bin == "" {
		target := os.Getenv("CARGO_TARGET_DIR")
		if target == "" {
			target = filepath.Join(repo, "target")
		}
		bin = filepath.Join(target, "debug")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	args = append([]string{"--agents", filepath.Join(repo, "examples", "agents.yaml"), "--listen", addr, "--metrics-listen", "off"}, args...)
	var log bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "adk-server"), args...)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v: build the binaries first (cargo build --workspace --bins)", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("adk-server log:\n%s", log.String())
		}
	})
	eventually(t, "adk-server listens on "+addr, 15*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("adk-server exited:\n%s", log.String())
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	conn, err := grpc.Dial(addr, grpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &server{addr: addr, conn: conn}
}

// eventually waits for cond, asking every 20 ms, and fails the test after deadline.
func eventually(t *testing.T, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func newUser(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "go-" + hex.EncodeToString(b)
}

func text(role, t string) *adkv1.Content {
	return &adkv1.Content{Role: role, Parts: []*adkv1.Part{{Kind: &adkv1.Part_Text{Text: t}}}}
}

func mustStruct(t *testing.T, m map[string]interface{}) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func events(t *testing.T, stream adkv1.AgentRunner_RunClient) []*adkv1.Event {
	t.Helper()
	var all []*adkv1.Event
	for {
		e, err := stream.Recv()
		if err == io.EOF {
			return all
		}
		if err != nil {
			t.Fatalf("run: %v (reason %q)", err, adk.Reason(err))
		}
		all = append(all, e)
	}
}

func textOf(e *adkv1.Event) string {
	var b strings.Builder
	for _, p := range e.GetContent().GetParts() {
		b.WriteString(p.GetText())
	}
	return b.String()
}

// expectReason fails unless err is a status with code and an ErrorInfo of domain adk.dev
// and reason.
func expectReason(t *testing.T, err error, code codes.Code, reason adkv1.ErrorReason) {
	t.Helper()
	if status.Code(err) != code || !adk.HasReason(err, reason) || adk.ErrorInfo(err).GetDomain() != adk.Domain {
		t.Fatalf("want %v %v, got %v (ErrorInfo %v)", code, reason, err, adk.ErrorInfo(err))
	}
}

func TestSessionsKeepStateByScope(t *testing.T) {
	s := startServer(t)
	sessions := adkv1.NewSessionServiceClient(s.conn)
	c, user := ctx(t), newUser(t)
	created, err := sessions.CreateSession(c, &adkv1.CreateSessionRequest{AppName: "assistant", UserId: user, SessionId: "a",
		State: mustStruct(t, map[string]interface{}{"user:name": "Alice", "temp:draft": true, "topic": "travel", "count": 1})})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{"user:name": "Alice", "topic": "travel", "count": 1.0}
	if got := created.State.AsMap(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("state %v, want %v (temp: dropped, numbers doubles)", got, want)
	}
	// user: state is the user's across sessions; session keys stay in their session.
	other, err := sessions.CreateSession(c, &adkv1.CreateSessionRequest{AppName: "assistant", UserId: user, SessionId: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if got := other.State.AsMap(); fmt.Sprint(got) != fmt.Sprint(map[string]interface{}{"user:name": "Alice"}) {
		t.Fatalf("another session's state %v", got)
	}
	us, err := sessions.GetUserState(c, &adkv1.GetUserStateRequest{AppName: "assistant", UserId: user})
	if err != nil {
		t.Fatal(err)
	}
	if got := us.State.AsMap(); fmt.Sprint(got) != "map[name:Alice]" {
		t.Fatalf("user state %v", got)
	}
	list, err := sessions.ListSessions(c, &adkv1.ListSessionsRequest{AppName: "assistant", UserId: user})
	if err != nil || len(list.Sessions) != 2 {
		t.Fatalf("list: %v, %v", list, err)
	}
}

func TestAppendEventHonoursItsPrecondition(t *testing.T) {
	s := startServer(t)
	sessions := adkv1.NewSessionServiceClient(s.conn)
	c, user := ctx(t), newUser(t)
	if _, err := sessions.CreateSession(c, &adkv1.CreateSessionRequest{AppName: "assistant", UserId: user, SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	appendAt := func(seq uint64, topic string) (*adkv1.Event, error) {
		v, _ := structpb.NewValue(topic)
		return sessions.AppendEvent(c, &adkv1.AppendEventRequest{AppName: "assistant", UserId: user, SessionId: "s",
			Event:        &adkv1.Event{Author: "user", Content: text("user", topic), Actions: &adkv1.EventActions{StateDelta: map[string]*structpb.Value{"topic": v}}},
			Precondition: &adkv1.AppendPrecondition{Expected: &adkv1.AppendPrecondition_LastSequence{LastSequence: seq}}})
	}
	first, err := appendAt(0, "first")
	if err != nil || first.Sequence != 1 {
		t.Fatalf("first append: %v, %v", first, err)
	}
	// A writer that still believes the session empty loses, and nothing of it is stored.
	_, err = appendAt(0, "stale")
	expectReason(t, err, codes.Aborted, adkv1.ErrorReason_PRECONDITION_FAILED)
	if _, ok := adk.RetryDelay(err); ok {
		t.Fatal("PRECONDITION_FAILED carries no RetryInfo: the same request fails again")
	}
	byID, err := sessions.AppendEvent(c, &adkv1.AppendEventRequest{AppName: "assistant", UserId: user, SessionId: "s",
		Event:        &adkv1.Event{Author: "user", Content: text("user", "second")},
		Precondition: &adkv1.AppendPrecondition{Expected: &adkv1.AppendPrecondition_LastEventId{LastEventId: first.Id}}})
	if err != nil || byID.Sequence != 2 {
		t.Fatalf("append after the last event id: %v, %v", byID, err)
	}
	got, err := sessions.GetSession(c, &adkv1.GetSessionRequest{AppName: "assistant", UserId: user, SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != 2 || got.State.AsMap()["topic"] != "first" {
		t.Fatalf("session after the appends: %d events, state %v", len(got.Events), got.State.AsMap())
	}
}

func TestArtifactsUnaryAndStreamed(t *testing.T) {
	s := startServer(t)
	artifacts := adkv1.NewArtifactServiceClient(s.conn)
	c, user := ctx(t), newUser(t)
	ref := &adkv1.ArtifactRef{AppName: "assistant", UserId: user, SessionId: "s", FileName: "notes.txt"}
	for i, body := range []string{"v one", "v two"} {
		saved, err := artifacts.SaveArtifact(c, &adkv1.SaveArtifactRequest{Ref: ref, Part: &adkv1.Part{Kind: &adkv1.Part_Text{Text: body}}})
		if err != nil || saved.Version != int64(i+1) {
			t.Fatalf("save %d: %v, %v", i, saved, err)
		}
	}
	one := int64(1)
	old, err := artifacts.LoadArtifact(c, &adkv1.LoadArtifactRequest{Ref: ref, Version: &one})
	if err != nil || old.Part.GetText() != "v one" {
		t.Fatalf("load v1: %v, %v", old, err)
	}
	latest, err := artifacts.LoadArtifact(c, &adkv1.LoadArtifactRequest{Ref: ref})
	if err != nil || latest.Version != 2 || latest.Part.GetText() != "v two" {
		t.Fatalf("load latest: %v, %v", latest, err)
	}

	// 6 MiB, more than one unary message may carry, up in 64 KiB chunks and down again.
	data := make([]byte, 6<<20)
	_, _ = rand.Read(data)
	bigRef := &adkv1.ArtifactRef{AppName: "assistant", UserId: user, SessionId: "s", FileName: "big.bin"}
	up, err := artifacts.UploadArtifact(c)
	if err != nil {
		t.Fatal(err)
	}
	size := uint64(len(data))
	if err := up.Send(&adkv1.UploadArtifactRequest{Message: &adkv1.UploadArtifactRequest_Header{Header: &adkv1.UploadHeader{
		Ref: bigRef, MimeType: "application/octet-stream", SizeBytes: &size}}}); err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 64 << 10 {
		end := off + 64<<10
		if end > len(data) {
			end = len(data)
		}
		if err := up.Send(&adkv1.UploadArtifactRequest{Message: &adkv1.UploadArtifactRequest_Chunk{Chunk: data[off:end]}}); err != nil {
			t.Fatal(err)
		}
	}
	saved, err := up.CloseAndRecv()
	if err != nil || saved.Version != 1 {
		t.Fatalf("upload: %v, %v", saved, err)
	}
	down, err := artifacts.DownloadArtifact(c, &adkv1.DownloadArtifactRequest{Ref: bigRef})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	var meta *adkv1.ArtifactMetadata
	chunks := 0
	for {
		m, err := down.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.GetMetadata() != nil {
			meta = m.GetMetadata()
		}
		if m.GetChunk() != nil {
			got.Write(m.GetChunk())
			chunks++
		}
	}
	if meta.GetSizeBytes() != size || meta.GetMimeType() != "application/octet-stream" || chunks < 2 || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("download: metadata %v, %d chunks, %d bytes (equal: %v)", meta, chunks, got.Len(), bytes.Equal(got.Bytes(), data))
	}
	// Too big for one message: the unary load says so, by reason.
	_, err = artifacts.LoadArtifact(c, &adkv1.LoadArtifactRequest{Ref: bigRef})
	expectReason(t, err, codes.ResourceExhausted, adkv1.ErrorReason_LIMIT_EXCEEDED)
}

func TestStreamedRunWithPartialEventsAndAClientTool(t *testing.T) {
	s := startServer(t)
	runner := adkv1.NewAgentRunnerClient(s.conn)
	c, user := ctx(t), newUser(t)
	stream, err := runner.Run(c, &adkv1.RunRequest{AppName: "assistant", UserId: user, SessionId: "s", CreateSession: true,
		NewMessage: text("user", "Hello, agent!"), RunConfig: &adkv1.RunConfig{StreamingMode: adkv1.StreamingMode_STREAMING_MODE_SSE}})
	if err != nil {
		t.Fatal(err)
	}
	var partial strings.Builder
	var final *adkv1.Event
	partials := 0
	for _, e := range events(t, stream) {
		if e.GetPartial() {
			partials++
			partial.WriteString(textOf(e))
			if e.Sequence != 0 {
				t.Fatalf("a partial event has sequence %d: partial events are never stored", e.Sequence)
			}
		} else if e.Author == "assistant" {
			final = e
		}
	}
	if partials < 2 || partial.String() != "You said: Hello, agent!" || textOf(final) != "You said: Hello, agent!" || final.Sequence == 0 {
		t.Fatalf("%d partials %q, final %v", partials, partial.String(), final)
	}

	// The booker asks the client to confirm: the turn ends with the call; a function_response
	// with its id resumes the invocation.
	stream, err = runner.Run(c, &adkv1.RunRequest{AppName: "trip_planner", UserId: user, SessionId: "trip", CreateSession: true,
		NewMessage: text("user", "Two nights at Hotel Sakura")})
	if err != nil {
		t.Fatal(err)
	}
	var call *adkv1.FunctionCall
	for _, e := range events(t, stream) {
		for _, p := range e.GetContent().GetParts() {
			if fc := p.GetFunctionCall(); fc != nil && len(e.LongRunningToolIds) == 1 && e.LongRunningToolIds[0] == fc.GetId() {
				call = fc
			}
		}
	}
	if call == nil || call.Name != "confirm_booking" || fmt.Sprint(call.Args.GetStructValue().AsMap()) != "map[hotel:Hotel Sakura nights:2]" {
		t.Fatalf("no long-running confirm_booking call: %v", call)
	}
	answer, _ := structpb.NewValue(map[string]interface{}{"confirmed": true})
	stream, err = runner.Run(c, &adkv1.RunRequest{AppName: "trip_planner", UserId: user, SessionId: "trip",
		NewMessage: &adkv1.Content{Role: "user", Parts: []*adkv1.Part{{Kind: &adkv1.Part_FunctionResponse{
			FunctionResponse: &adkv1.FunctionResponse{Name: call.Name, Id: call.Id, Response: answer}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var replies []string
	for _, e := range events(t, stream) {
		if txt := textOf(e); txt != "" {
			replies = append(replies, e.Author+": "+txt)
		}
	}
	if len(replies) == 0 || replies[len(replies)-1] != "booker: Booked: 2 nights at Hotel Sakura." {
		t.Fatalf("after the function_response: %q", replies)
	}
}

func TestWatchSessionResumesFromASequence(t *testing.T) {
	s := startServer(t)
	sessions := adkv1.NewSessionServiceClient(s.conn)
	c, user := ctx(t), newUser(t)
	if _, err := sessions.CreateSession(c, &adkv1.CreateSessionRequest{AppName: "assistant", UserId: user, SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	appendText := func(txt string) {
		if _, err := sessions.AppendEvent(c, &adkv1.AppendEventRequest{AppName: "assistant", UserId: user, SessionId: "s",
			Event: &adkv1.Event{Author: "user", Content: text("user", txt)}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, txt := range []string{"one", "two", "three"} {
		appendText(txt)
	}
	watchCtx, stop := context.WithCancel(c)
	defer stop()
	after := uint64(1)
	watch, err := sessions.WatchSession(watchCtx, &adkv1.WatchSessionRequest{AppName: "assistant", UserId: user, SessionId: "s", AfterSequence: &after})
	if err != nil {
		t.Fatal(err)
	}
	next := func() *adkv1.Event {
		e, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		return e
	}
	// The stored events after sequence 1 first, then a live one: nothing missed or repeated.
	for _, want := range []struct {
		seq  uint64
		text string
	}{{2, "two"}, {3, "three"}} {
		if e := next(); e.Sequence != want.seq || textOf(e) != want.text {
			t.Fatalf("watch sent #%d %q, want #%d %q", e.Sequence, textOf(e), want.seq, want.text)
		}
	}
	appendText("four")
	if e := next(); e.Sequence != 4 || textOf(e) != "four" {
		t.Fatalf("live event #%d %q", e.Sequence, textOf(e))
	}
	stop()
	if _, err := watch.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestErrorDetailsByReason(t *testing.T) {
	s := startServer(t, "--max-watches", "1")
	sessions := adkv1.NewSessionServiceClient(s.conn)
	artifacts := adkv1.NewArtifactServiceClient(s.conn)
	runner := adkv1.NewAgentRunnerClient(s.conn)
	c, user := ctx(t), newUser(t)

	_, err := sessions.GetSession(c, &adkv1.GetSessionRequest{AppName: "assistant", UserId: user, SessionId: "nope"})
	expectReason(t, err, codes.NotFound, adkv1.ErrorReason_SESSION_NOT_FOUND)

	_, err = sessions.CreateSession(c, &adkv1.CreateSessionRequest{AppName: "not\tvalid", UserId: user})
	expectReason(t, err, codes.InvalidArgument, adkv1.ErrorReason_INVALID_ARGUMENT)
	if adk.Field(err) != "app_name" {
		t.Fatalf("BadRequest field %q, want app_name", adk.Field(err))
	}

	if _, err := sessions.CreateSession(c, &adkv1.CreateSessionRequest{AppName: "assistant", UserId: user, SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	_, err = sessions.CreateSession(c, &adkv1.CreateSessionRequest{AppName: "assistant", UserId: user, SessionId: "s"})
	expectReason(t, err, codes.AlreadyExists, adkv1.ErrorReason_SESSION_ALREADY_EXISTS)

	_, err = artifacts.LoadArtifact(c, &adkv1.LoadArtifactRequest{Ref: &adkv1.ArtifactRef{AppName: "assistant", UserId: user, SessionId: "s", FileName: "none.txt"}})
	expectReason(t, err, codes.NotFound, adkv1.ErrorReason_ARTIFACT_NOT_FOUND)

	stream, err := runner.Run(c, &adkv1.RunRequest{AppName: "no_such_app", UserId: user, SessionId: "s", NewMessage: text("user", "hi")})
	if err == nil {
		_, err = stream.Recv()
	}
	expectReason(t, err, codes.NotFound, adkv1.ErrorReason_APP_NOT_FOUND)

	// A concurrency quota (one watch here) frees up as other calls end: RetryInfo says when
	// to try again.
	watchCtx, stop := context.WithCancel(c)
	defer stop()
	first, err := sessions.WatchSession(watchCtx, &adkv1.WatchSessionRequest{AppName: "assistant", UserId: user, SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	// Its response headers come once the server's handler has taken the quota.
	if _, err := first.Header(); err != nil {
		t.Fatal(err)
	}
	w, second := sessions.WatchSession(c, &adkv1.WatchSessionRequest{AppName: "assistant", UserId: user, SessionId: "s"})
	if second == nil {
		_, second = w.Recv()
	}
	expectReason(t, second, codes.ResourceExhausted, adkv1.ErrorReason_LIMIT_EXCEEDED)
	if adk.ErrorInfo(second).GetMetadata()["limit"] != "max_watches" {
		t.Fatalf("metadata %v", adk.ErrorInfo(second).GetMetadata())
	}
	if delay, ok := adk.RetryDelay(second); !ok || delay <= 0 {
		t.Fatalf("RetryInfo %v %v", delay, ok)
	}
}

// wireSizes records the payloads received: their size and their size on the wire.
type wireSizes struct {
	mu       sync.Mutex
	received []*stats.InPayload
}

func (w *wireSizes) TagRPC(c context.Context, _ *stats.RPCTagInfo) context.Context   { return c }
func (w *wireSizes) TagConn(c context.Context, _ *stats.ConnTagInfo) context.Context { return c }
func (w *wireSizes) HandleConn(context.Context, stats.ConnStats)                     {}
func (w *wireSizes) HandleRPC(_ context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InPayload); ok {
		w.mu.Lock()
		w.received = append(w.received, in)
		w.mu.Unlock()
	}
}

func TestCompressedRequestsAndResponses(t *testing.T) {
	s := startServer(t)
	sizes := &wireSizes{}
	// Every request gzip-compressed; grpc-go accepts gzip answers once the codec is registered
	// (importing encoding/gzip does).
	conn, err := grpc.Dial(s.addr, grpc.WithInsecure(), grpc.WithStatsHandler(sizes),
		grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sessions := adkv1.NewSessionServiceClient(conn)
	artifacts := adkv1.NewArtifactServiceClient(conn)
	runner := adkv1.NewAgentRunnerClient(conn)
	c, user := ctx(t), newUser(t)
	notes := strings.Repeat("the quick brown fox jumps over the lazy dog; ", 400)
	if _, err := sessions.CreateSession(c, &adkv1.CreateSessionRequest{AppName: "assistant", UserId: user, SessionId: "s",
		State: mustStruct(t, map[string]interface{}{"notes": notes})}); err != nil {
		t.Fatal(err)
	}
	sizes.mu.Lock()
	sizes.received = nil
	sizes.mu.Unlock()
	got, err := sessions.GetSession(c, &adkv1.GetSessionRequest{AppName: "assistant", UserId: user, SessionId: "s"})
	if err != nil || got.State.AsMap()["notes"] != notes {
		t.Fatalf("get: %v", err)
	}
	sizes.mu.Lock()
	in := sizes.received
	sizes.mu.Unlock()
	if len(in) != 1 || in[0].WireLength >= in[0].Length/4 {
		t.Fatalf("the answer was not compressed: %d payloads, %+v", len(in), in)
	}
	if _, err := artifacts.SaveArtifact(c, &adkv1.SaveArtifactRequest{Ref: &adkv1.ArtifactRef{AppName: "assistant", UserId: user, SessionId: "s", FileName: "n.txt"},
		Part: &adkv1.Part{Kind: &adkv1.Part_Text{Text: notes}}}); err != nil {
		t.Fatal(err)
	}
	stream, err := runner.Run(c, &adkv1.RunRequest{AppName: "assistant", UserId: user, SessionId: "s", NewMessage: text("user", "Hello, gzip!")})
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, stream)
	if len(evs) == 0 || textOf(evs[len(evs)-1]) != "You said: Hello, gzip!" {
		t.Fatalf("run over gzip: %v", evs)
	}
}

// A server given a generation model (an OpenAI-compatible fake whose every answer extracts
// one fact): IngestEvents buffers an event once and a flush generates its fact, which
// SearchMemory finds and ListMemoryRevisions lists; GenerateMemories of the same event
// again changes nothing.
func TestIngestedEventsBecomeFactsWithRevisions(t *testing.T) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		facts := `{"facts":[{"fact":"The user likes window seats","topics":["USER_PREFERENCES"]}]}`
		reply, _ := json.Marshal(map[string]interface{}{
			"id": "c", "object": "chat.completion", "created": 0, "model": "fake",
			"choices": []interface{}{map[string]interface{}{"index": 0, "finish_reason": "stop",
				"message": map[string]interface{}{"role": "assistant", "content": facts}}},
		})
		w.Header().Set("content-type", "application/json")
		_, _ = w.Write(reply)
	}))
	t.Cleanup(model.Close)
	generation := filepath.Join(t.TempDir(), "generation.yaml")
	yaml := fmt.Sprintf("'*':\n  model: { provider: openai, model: fake, base_url: '%s/v1' }\n", model.URL)
	if err := os.WriteFile(generation, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--memory-generation", generation)
	memory := adkv1.NewMemoryServiceClient(s.conn)
	c, user := ctx(t), newUser(t)
	said := &adkv1.Event{Id: "e1", Author: "user", Content: text("user", "I like window seats")}
	for _, want := range []int64{1, 1} { // an event ingested again is buffered once
		got, err := memory.IngestEvents(c, &adkv1.IngestEventsRequest{AppName: "app", UserId: user, StreamId: "s1", Events: []*adkv1.Event{said}})
		if err != nil || got.BufferedEvents != want {
			t.Fatalf("ingest: %v, %v; want %d buffered", got, err, want)
		}
	}
	flushed, err := memory.IngestEvents(c, &adkv1.IngestEventsRequest{AppName: "app", UserId: user, ForceFlush: true})
	if err != nil || flushed.BufferedEvents != 0 || len(flushed.Memories) != 1 || flushed.Memories[0].Action != adkv1.MemoryAction_MEMORY_ACTION_CREATED {
		t.Fatalf("flush: %v, %v", flushed, err)
	}
	fact := flushed.Memories[0].GetMemory().GetFact()
	if fact.GetRevision() != 1 || fmt.Sprint(fact.GetSourceEventIds()) != "[e1]" {
		t.Fatalf("fact %v", fact)
	}
	found, err := memory.SearchMemory(c, &adkv1.SearchMemoryRequest{AppName: "app", UserId: user, Query: "window seats"})
	if err != nil || len(found.Memories) != 1 || found.Memories[0].Author != "user" {
		t.Fatalf("search: %v, %v", found, err)
	}
	revisions, err := memory.ListMemoryRevisions(c, &adkv1.ListMemoryRevisionsRequest{AppName: "app", UserId: user, MemoryId: found.Memories[0].Id})
	if err != nil || len(revisions.Revisions) != 1 || revisions.Revisions[0].Fact != "The user likes window seats" {
		t.Fatalf("revisions: %v, %v", revisions, err)
	}
	again, err := memory.GenerateMemories(c, &adkv1.GenerateMemoriesRequest{AppName: "app", UserId: user, Events: []*adkv1.Event{said}})
	if err != nil || len(again.Memories) != 0 {
		t.Fatalf("generate again: %v, %v", again, err)
	}
}
