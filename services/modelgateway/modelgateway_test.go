package modelgateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

func startFake(t *testing.T, cfg fakellm.Config) *fakellm.Instance {
	t.Helper()
	in, err := fakellm.Start(context.Background(), "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

type harness struct {
	svc  *Service
	conn *grpc.ClientConn
	cli  rmv1.ModelGatewayClient
	http string               // base URL of the OpenAI front
	reg  *prometheus.Registry // the gateway's metrics, /metrics' registry
}

// engineEnv and grpcEngineEnv name the HTTP and gRPC front engines the
// tests run against when set (make test runs the package's tests once
// with each engine of each front).
const (
	engineEnv     = "MODELGATEWAY_TEST_HTTP_ENGINE"
	grpcEngineEnv = "MODELGATEWAY_TEST_GRPC_ENGINE"
)

// withEngine sets fc's front engines from engineEnv and grpcEngineEnv,
// unless the test chose them.
func withEngine(fc *FileConfig) *FileConfig {
	if fc.HTTPFront.Engine == "" {
		fc.HTTPFront.Engine = os.Getenv(engineEnv)
	}
	if fc.GRPCFront.Engine == "" {
		fc.GRPCFront.Engine = os.Getenv(grpcEngineEnv)
	}
	return fc
}

func startGateway(t *testing.T, fc *FileConfig, clk clock.Clock) *harness {
	t.Helper()
	env := daemontest.Env(t)
	svc, err := New(context.Background(), Config{File: withEngine(fc), OpenAIAddr: "127.0.0.1:0", Clock: clk}, env)
	if err != nil {
		t.Fatal(err)
	}
	addr := daemontest.Serve(t, env, svc)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &harness{svc: svc, conn: conn, cli: rmv1.NewModelGatewayClient(conn), http: "http://" + svc.OpenAIAddr(), reg: env.Registry}
}

func backends(kind string, fakes ...*fakellm.Instance) []BackendConfig {
	var out []BackendConfig
	for i, f := range fakes {
		out = append(out, BackendConfig{ID: fmt.Sprintf("b%d", i), BaseURL: f.URL, Kind: kind, Model: "fake-model"})
	}
	return out
}

func userMsg(text string) *rmv1.ChatMessage {
	return &rmv1.ChatMessage{Role: "user", Content: []*rmv1.ContentPart{{Part: &rmv1.ContentPart_Text{Text: text}}}}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func script(t *testing.T, lines string) []fakellm.Rule {
	t.Helper()
	var rules []fakellm.Rule
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		var r fakellm.Rule
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	return rules
}

func TestChatTokenDataGRPC(t *testing.T) {
	f := startFake(t, fakellm.Config{Script: script(t, `{"match": "weather", "reply": "sunny and warm"}
{"match": "click", "tool_calls": [{"name": "click", "arguments": {"x": 1}}]}`)})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f)}, nil)

	resp, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{
		Messages: []*rmv1.ChatMessage{userMsg("how is the weather")}, RoutingKey: "ep1",
		Logprobs: true, TopLogprobs: 2, ReturnTokenIds: true,
		Sampling: &rmv1.SamplingParams{Temperature: new(0.0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := resp.GetChoices()[0]
	if got := c.GetMessage().GetContent()[0].GetText(); got != "sunny and warm" {
		t.Errorf("text = %q, want the scripted reply", got)
	}
	want := fakellm.TokenIDs("sunny and warm")
	if fmt.Sprint(c.GetTokenIds()) != fmt.Sprint(want) {
		t.Errorf("token_ids = %v, want %v", c.GetTokenIds(), want)
	}
	if len(c.GetLogprobs()) != 3 || c.GetLogprobs()[2].GetTokenId() != int32(want[2]) || len(c.GetLogprobs()[0].GetTop()) != 2 {
		t.Errorf("logprobs = %v, want 3 entries with ids and 2 alternatives", c.GetLogprobs())
	}
	if len(resp.GetPromptTokenIds()) != 6 || resp.GetBackend() != "b0" || resp.GetAttempts() != 1 || resp.GetUsage().GetCompletionTokens() != 3 {
		t.Errorf("response = %v, want 6 prompt ids, backend b0, 1 attempt, 3 completion tokens", resp)
	}

	// Tool calls round-trip too.
	resp, err = h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{
		Messages: []*rmv1.ChatMessage{userMsg("click the button")},
		Tools:    []*rmv1.Tool{{Name: "click", ParametersJson: `{"type":"object"}`}}, ToolChoice: "auto",
	})
	if err != nil {
		t.Fatal(err)
	}
	if tc := resp.GetChoices()[0].GetMessage().GetToolCalls(); len(tc) != 1 || tc[0].GetName() != "click" || tc[0].GetArgumentsJson() != `{"x":1}` {
		t.Errorf("tool calls = %v, want click {\"x\":1}", tc)
	}
}

// TestTokenIDsFromTokenStrings checks the fallback for backends that only
// spell tokens as "token_id:N".
func TestTokenIDsFromTokenStrings(t *testing.T) {
	f := startFake(t, fakellm.Config{Script: script(t, `{"match": "", "reply": "a b"}`)})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f)}, nil)
	resp, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{
		Messages: []*rmv1.ChatMessage{userMsg("x")}, Logprobs: true,
		ExtraBodyJson: `{"return_tokens_as_token_ids": true}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.GetChoices()[0].GetTokenIds(), fakellm.TokenIDs("a b"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("token ids parsed from logprob tokens = %v, want %v", got, want)
	}
}

func postJSON(t *testing.T, ctx context.Context, url string, body any, hdr map[string]string) (*http.Response, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return http.DefaultClient.Do(req)
}

func TestChatHTTP(t *testing.T) {
	f := startFake(t, fakellm.Config{Script: script(t, `{"match": "", "reply": "one two three"}`)})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f), InitialVersion: 3}, nil)
	want := fakellm.TokenIDs("one two three")

	resp, err := postJSON(t, ctxT(t, 5*time.Second), h.http+"/v1/chat/completions", map[string]any{
		"model": "fake-model", "messages": []map[string]any{{"role": "user", "content": "hi"}},
		"return_token_ids": true, "logprobs": true,
	}, map[string]string{"X-Routing-Key": "ep"})
	if err != nil {
		t.Fatal(err)
	}
	var got openaiapi.ChatResponse
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if fmt.Sprint(got.Choices[0].TokenIDs) != fmt.Sprint(want) || len(got.PromptTokenIDs) == 0 || len(got.Choices[0].LogProbs.Content) != 3 {
		t.Errorf("HTTP answer = %+v, want token ids %v, prompt ids and 3 logprobs", got, want)
	}
	if v := resp.Header.Get("X-Model-Version"); v != "3" {
		t.Errorf("X-Model-Version = %q, want 3", v)
	}
	if got := testutil.ToFloat64(h.svc.met.Tokens.WithLabelValues("b0", "completion")); got != 3 {
		t.Errorf("completion tokens metric = %v, want 3", got)
	}

	// Streaming, with the model left to the default.
	resp, err = postJSON(t, ctxT(t, 5*time.Second), h.http+"/v1/chat/completions", map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "hi"}}, "stream": true, "return_token_ids": true,
		"stream_options": map[string]any{"include_usage": true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ids []int
	var text strings.Builder
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var ch openaiapi.Chunk
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			ids = append(ids, c.TokenIDs...)
			text.WriteString(c.Delta.Content)
		}
	}
	if !done || text.String() != "one two three" || fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("stream: done %v text %q ids %v; want [DONE], %q, %v", done, text.String(), ids, "one two three", want)
	}
	// The gateway counts after relaying the last byte, maybe after the
	// client read it.
	waitFor(t, "completion tokens metric to reach 6 after the stream", func() bool {
		return testutil.ToFloat64(h.svc.met.Tokens.WithLabelValues("b0", "completion")) == 6
	})
	if resp.Trailer.Get("X-Version-Changed") != "false" {
		t.Errorf("trailer X-Version-Changed = %q, want false", resp.Trailer.Get("X-Version-Changed"))
	}

	resp, err = http.Get(h.http + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"id":"fake-model"`) {
		t.Errorf("/v1/models = %s, want fake-model", body)
	}
}

func pngBytes(t *testing.T, side int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, side, side))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBadRequests(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	fc := &FileConfig{Backends: backends("vllm", f), Limits: Limits{MaxImageBytes: 1000}}
	h := startGateway(t, fc, nil)
	big := bytes.Repeat([]byte{0}, 2000)
	big = append(pngBytes(t, 1), big...)
	img := func(im *rmv1.Image) []*rmv1.ChatMessage {
		return []*rmv1.ChatMessage{{Role: "user", Content: []*rmv1.ContentPart{{Part: &rmv1.ContentPart_Image{Image: im}}}}}
	}
	tests := []struct {
		name      string
		req       *rmv1.ChatRequest
		wantField string
	}{
		{"no messages", &rmv1.ChatRequest{}, "messages"},
		{"oversized image", &rmv1.ChatRequest{Messages: img(&rmv1.Image{Data: big, MediaType: "image/png"})}, "messages[0].content[0].image.data"},
		{"not an image", &rmv1.ChatRequest{Messages: img(&rmv1.Image{Data: []byte("hello")})}, "messages[0].content[0].image.data"},
		{"bad role", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: "robot"}}}, "messages[0].role"},
		{"bad temperature", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, Sampling: &rmv1.SamplingParams{Temperature: new(3.0)}}, "sampling.temperature"},
		{"unknown tool choice", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, ToolChoice: "nope"}, "tool_choice"},
		{"bad extra body", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, ExtraBodyJson: "[1]"}, "extra_body_json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.cli.Chat(ctxT(t, 5*time.Second), tt.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("err = %v, want InvalidArgument naming %s", err, tt.wantField)
			}
		})
	}
	if _, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Model: "gpt-9", Messages: []*rmv1.ChatMessage{userMsg("x")}}); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "model") {
		t.Errorf("unknown model: err = %v, want NotFound naming model", err)
	}
	// A small image passes and reaches the backend as a data URL.
	if _, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: img(&rmv1.Image{Data: pngBytes(t, 2)})}); err != nil {
		t.Errorf("small image: %v", err)
	}
	if n := f.Stats().Requests; n != 1 {
		t.Errorf("backend saw %d requests, want only the valid one", n)
	}

	httpTests := []struct {
		name string
		body any
		code int
		want string
	}{
		{"no messages", map[string]any{"messages": []any{}}, 400, "messages"},
		{"unknown model", map[string]any{"model": "gpt-9", "messages": []map[string]any{{"role": "user", "content": "x"}}}, 404, "model"},
		{"oversized image", map[string]any{"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + strings.Repeat("A", 4000)}},
		}}}}, 400, "messages[0].content[0].image_url.url"},
		{"not json", "nope", 400, "body: not a JSON object"},
	}
	for _, tt := range httpTests {
		t.Run("http "+tt.name, func(t *testing.T) {
			resp, err := postJSON(t, ctxT(t, 5*time.Second), h.http+"/v1/chat/completions", tt.body, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.want) {
				t.Errorf("status %d body %s, want %d naming %q", resp.StatusCode, body, tt.code, tt.want)
			}
		})
	}
}

// TestHTTPRefusals checks the answers the HTTP front gives before routing:
// bodies over the limit, wrong methods, unknown paths, all in OpenAI's
// error envelope.
func TestHTTPRefusals(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f), Limits: Limits{MaxRequestBytes: 1024}}, nil)
	do := func(method, path, body string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctxT(t, 5*time.Second), method, h.http+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`
	if code, _, body := do("POST", "/v1/chat/completions", big); code != 413 || !strings.Contains(body, `"type":"request_too_large"`) {
		t.Errorf("oversized body: %d %s, want 413 request_too_large", code, body)
	}
	// Written whole before the answer is read (OpenAI's Python client
	// does), a body far over the limit still gets its 413, not a reset.
	if got, err := postWholeThenRead(t, h.http, "/v1/chat/completions", "", 16<<20); err != nil || got.code != 413 || !strings.Contains(got.body, `"type":"request_too_large"`) {
		t.Errorf("16 MiB body written whole: %d %s %v, want 413 request_too_large", got.code, got.body, err)
	}
	if code, hdr, body := do("GET", "/v1/chat/completions", ""); code != 405 || hdr.Get("Allow") != "POST" || !strings.Contains(body, `"error"`) {
		t.Errorf("GET chat: %d Allow %q %s, want 405 Allow POST", code, hdr.Get("Allow"), body)
	}
	if code, _, body := do("GET", "/v2/nothing", ""); code != 404 || !strings.Contains(body, `"type":"not_found"`) {
		t.Errorf("unknown path: %d %s, want 404 not_found", code, body)
	}
	if code, _, body := do("GET", "/v1/models", ""); code != 200 || !strings.Contains(body, "fake-model") {
		t.Errorf("models: %d %s", code, body)
	}
	if n := f.Stats().Requests; n != 0 {
		t.Errorf("backend saw %d chat requests, want none", n)
	}
}

// TestFailoverWhenBackendKilled kills one of two backends while requests
// run; every request must still be answered.
func TestFailoverWhenBackendKilled(t *testing.T) {
	a := startFake(t, fakellm.Config{TTFT: 20 * time.Millisecond})
	b := startFake(t, fakellm.Config{TTFT: 20 * time.Millisecond})
	h := startGateway(t, &FileConfig{
		Backends: backends("vllm", a, b), Routing: RoutingConfig{Policy: "round_robin"},
		Retry: RetryConfig{MaxAttempts: 4, BackoffBase: 5 * time.Millisecond},
	}, nil)
	const workers, perWorker = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	var once sync.Once
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if w == 0 && i == 5 {
					once.Do(func() { a.Close() }) // killed mid-run, connections dropped
				}
				_, err := h.cli.Chat(ctxT(t, 10*time.Second), &rmv1.ChatRequest{
					Messages: []*rmv1.ChatMessage{userMsg("x")}, RoutingKey: fmt.Sprint("ep", w),
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("request lost: %v", err)
	}
	if got := b.Stats().Completed; got < workers*perWorker/2 {
		t.Errorf("surviving backend completed %d, want at least half of %d", got, workers*perWorker)
	}
}

func listBackend(t *testing.T, h *harness, id string) *rmv1.Backend {
	t.Helper()
	resp, err := h.cli.ListBackends(ctxT(t, 5*time.Second), &rmv1.ListBackendsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.GetBackends() {
		if b.GetId() == id {
			return b
		}
	}
	t.Fatalf("backend %s not listed", id)
	return nil
}

func TestBreakerOpensAndCloses(t *testing.T) {
	bad := startFake(t, fakellm.Config{Faults: fakellm.Faults{ErrorRate: 1}})
	good := startFake(t, fakellm.Config{})
	clk := clock.NewFake(time.Unix(1000, 0))
	h := startGateway(t, &FileConfig{
		Backends: backends("vllm", bad, good), Routing: RoutingConfig{Policy: "round_robin"},
		Breaker: BreakerConfig{FailureThreshold: 3, OpenFor: time.Minute, HalfOpenSuccesses: 2},
		Retry:   RetryConfig{MaxAttempts: 3, BackoffBase: time.Millisecond},
	}, clk)
	chat := func() {
		t.Helper()
		if _, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}}); err != nil {
			t.Fatalf("chat: %v (failover should hide the bad backend)", err)
		}
	}
	for range 8 {
		chat()
	}
	if got := listBackend(t, h, "b0").GetBreaker(); got != rmv1.BreakerState_BREAKER_STATE_OPEN {
		t.Fatalf("breaker of failing backend = %v, want OPEN", got)
	}
	seen := bad.Stats().Requests
	for range 4 {
		chat()
	}
	if got := bad.Stats().Requests; got != seen {
		t.Errorf("open breaker let %d requests through, want 0", got-seen)
	}
	// The backend recovers; after the cooldown trial requests close it.
	bad.SetFaults(fakellm.Faults{})
	clk.Advance(time.Minute)
	for range 6 {
		chat()
	}
	if got := listBackend(t, h, "b0").GetBreaker(); got != rmv1.BreakerState_BREAKER_STATE_CLOSED {
		t.Errorf("breaker after recovery = %v, want CLOSED", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCancellationReachesBackend(t *testing.T) {
	f := startFake(t, fakellm.Config{TTFT: time.Minute})
	// A breaker that opens at the first failure: callers going away must
	// not count as backend failures.
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f), Breaker: BreakerConfig{FailureThreshold: 1}}, nil)

	_, err := h.cli.Chat(ctxT(t, 200*time.Millisecond), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	waitFor(t, "gRPC cancellation at the backend", func() bool { return f.Stats().Canceled == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	answered := make(chan error, 1)
	go func() {
		resp, err := postJSON(t, ctx, h.http+"/v1/chat/completions", map[string]any{
			"messages": []map[string]any{{"role": "user", "content": "x"}}, "stream": true,
		}, nil)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	// A streamed request counts as in flight at the gateway too.
	waitFor(t, "HTTP request in flight at backend and gateway", func() bool {
		return f.Stats().InFlight == 1 && listBackend(t, h, "b0").GetInFlight() == 1
	})
	cancel()
	if err := <-answered; err == nil {
		t.Error("cancelled HTTP request answered")
	}
	waitFor(t, "HTTP cancellation at the backend", func() bool { return f.Stats().Canceled == 2 })
	waitFor(t, "in-flight count back to 0", func() bool { return listBackend(t, h, "b0").GetInFlight() == 0 })
	if b := listBackend(t, h, "b0"); b.GetBreaker() != rmv1.BreakerState_BREAKER_STATE_CLOSED || b.GetFailures() != 0 {
		t.Errorf("after caller cancellations: breaker %v, failures %d; want CLOSED, 0", b.GetBreaker(), b.GetFailures())
	}
}

func TestStickyRoutingUntilImbalance(t *testing.T) {
	a := startFake(t, fakellm.Config{})
	b := startFake(t, fakellm.Config{})
	fakes := map[string]*fakellm.Instance{"b0": a, "b1": b}
	h := startGateway(t, &FileConfig{
		Backends: backends("vllm", a, b),
		Routing:  RoutingConfig{Policy: "sticky_least_loaded", ImbalanceAbs: 2, ImbalanceRel: 1.5},
	}, nil)
	chat := func(ctx context.Context, key string) (*rmv1.ChatResponse, error) {
		return h.cli.Chat(ctx, &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, RoutingKey: key})
	}
	first, err := chat(ctxT(t, 5*time.Second), "ep")
	if err != nil {
		t.Fatal(err)
	}
	pinned := first.GetBackend()
	for i := range 5 {
		// Other keys in between must not move it.
		chat(ctxT(t, 5*time.Second), fmt.Sprint("other", i))
		resp, err := chat(ctxT(t, 5*time.Second), "ep")
		if err != nil || resp.GetBackend() != pinned {
			t.Fatalf("turn %d went to %s (err %v), want pinned %s", i, resp.GetBackend(), err, pinned)
		}
	}
	if got := listBackend(t, h, pinned).GetPinnedKeys(); got < 1 {
		t.Errorf("pinned_keys of %s = %d, want >= 1", pinned, got)
	}
	// Load the pinned backend with three hanging turns of the key: the
	// third exceeds both thresholds (3 - 0 > 2 and 3 > 1.5 x 0).
	fakes[pinned].SetFaults(fakellm.Faults{HangRate: 1})
	hangCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); chat(hangCtx, "ep") }()
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "3 requests in flight", func() bool { return listBackend(t, h, pinned).GetInFlight() == 3 })
	fakes[pinned].SetFaults(fakellm.Faults{})
	resp, err := chat(ctxT(t, 5*time.Second), "ep")
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetBackend() == pinned {
		t.Errorf("imbalanced turn stayed on %s, want moved", pinned)
	}
	cancel()
	wg.Wait()
}

func TestUpdateWeights(t *testing.T) {
	for _, kind := range []string{"vllm", "sglang", "openai"} {
		t.Run(kind, func(t *testing.T) {
			a := startFake(t, fakellm.Config{})
			b := startFake(t, fakellm.Config{})
			h := startGateway(t, &FileConfig{Backends: backends(kind, a, b), InitialVersion: 1}, nil)
			for _, strategy := range []rmv1.UpdateStrategy{rmv1.UpdateStrategy_UPDATE_STRATEGY_ALL_AT_ONCE, rmv1.UpdateStrategy_UPDATE_STRATEGY_ROLLING} {
				v := h.svc.g.Version() + 1
				res, err := h.cli.UpdateWeights(ctxT(t, 5*time.Second), &rmv1.UpdateWeightsRequest{Version: v, Source: fmt.Sprint("/ckpt/", v), Strategy: strategy})
				if err != nil {
					t.Fatal(err)
				}
				if res.GetVersion() != v || res.GetPreviousVersion() != v-1 || len(res.GetBackends()) != 2 || !res.GetBackends()[0].GetOk() {
					t.Errorf("%v: UpdateWeights = %v, want version %d from %d, both ok", strategy, res, v, v-1)
				}
				chat, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
				if err != nil || chat.GetModelVersion() != v {
					t.Errorf("chat after update: version %d err %v, want %d", chat.GetModelVersion(), err, v)
				}
				if kind != "openai" {
					if st := a.Stats(); st.WeightVersion != fmt.Sprint(v) || st.Paused {
						t.Errorf("backend stats %+v, want version %d and resumed", st, v)
					}
				}
			}
			_, err := h.cli.UpdateWeights(ctxT(t, 5*time.Second), &rmv1.UpdateWeightsRequest{Version: 2})
			if status.Code(err) != codes.FailedPrecondition {
				t.Errorf("stale version: err %v, want FailedPrecondition", err)
			}
			_, err = h.cli.UpdateWeights(ctxT(t, 5*time.Second), &rmv1.UpdateWeightsRequest{})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "version") {
				t.Errorf("version 0: err %v, want InvalidArgument naming version", err)
			}
		})
	}
}

func TestVersionChangedFlag(t *testing.T) {
	f := startFake(t, fakellm.Config{TTFT: 300 * time.Millisecond})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f)}, nil)
	type result struct {
		resp *rmv1.ChatResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
		done <- result{r, err}
	}()
	waitFor(t, "request in flight", func() bool { return f.Stats().InFlight == 1 })
	if _, err := h.cli.UpdateWeights(ctxT(t, 5*time.Second), &rmv1.UpdateWeightsRequest{Version: 1}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.resp.GetVersionChanged() {
		t.Errorf("request spanning an update: %v err %v, want version_changed", r.resp, r.err)
	}
	r2, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
	if err != nil || r2.GetVersionChanged() || r2.GetModelVersion() != 1 {
		t.Errorf("request after update: %v err %v, want version 1 unflagged", r2, err)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"no backends", "backends: []", "backends"},
		{"bad url", "backends: [{id: a, base_url: 'ftp://x', model: m}]", "backends[0].base_url"},
		{"bad kind", "backends: [{id: a, base_url: 'http://x', model: m, kind: tgi}]", "backends[0].kind"},
		{"unknown key", "backends: [{id: a, base_url: 'http://x', model: m, key: s}]", "key"},
		{"bad policy", "backends: [{id: a, base_url: 'http://x', model: m}]\nrouting: {policy: random}", "routing.policy"},
		{"bad engine", "backends: [{id: a, base_url: 'http://x', model: m}]\nhttp_front: {engine: threads}", "http_front.engine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseConfig err = %v, want naming %q", err, tt.want)
			}
		})
	}
	if _, err := LoadFile("../../examples/modelgateway.yaml"); err != nil {
		t.Errorf("example config: %v", err)
	}
}

func TestHealthProbing(t *testing.T) {
	a := startFake(t, fakellm.Config{})
	b := startFake(t, fakellm.Config{})
	clk := clock.NewFake(time.Unix(1000, 0))
	h := startGateway(t, &FileConfig{
		Backends: backends("vllm", a, b), Routing: RoutingConfig{Policy: "round_robin"},
		Health: HealthConfig{Interval: time.Second, FailureThreshold: 2, SuccessThreshold: 2},
	}, clk)
	// probe lets one probe round run: the loop waits on the clock between
	// rounds.
	probe := func() {
		waitFor(t, "prober to wait on the clock", func() bool { return clk.Waiters() > 0 })
		clk.Advance(time.Second)
		// The next wait starts once this round is done.
		waitFor(t, "probe round to finish", func() bool { return clk.Waiters() > 0 })
	}
	waitFor(t, "first probe round", func() bool { return clk.Waiters() > 0 })
	a.SetFaults(fakellm.Faults{HealthDown: true})
	probe()
	if !listBackend(t, h, "b0").GetHealthy() {
		t.Fatal("b0 unhealthy after 1 failed probe, want healthy until the threshold of 2")
	}
	probe()
	if listBackend(t, h, "b0").GetHealthy() {
		t.Fatal("b0 healthy after 2 failed probes, want unhealthy")
	}
	before := a.Stats().Requests
	for range 6 {
		resp, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
		if err != nil || resp.GetBackend() != "b1" {
			t.Fatalf("chat went to %s (err %v), want the healthy b1", resp.GetBackend(), err)
		}
	}
	if got := a.Stats().Requests - before; got != 0 {
		t.Errorf("unhealthy backend got %d requests, want 0", got)
	}
	a.SetFaults(fakellm.Faults{})
	probe()
	probe()
	if !listBackend(t, h, "b0").GetHealthy() {
		t.Error("b0 still unhealthy after 2 good probes, want healthy")
	}
}

// TestRequestsDuringUpdateWait checks that a request arriving while every
// backend is being updated waits for the update instead of failing.
func TestRequestsDuringUpdateWait(t *testing.T) {
	f := startFake(t, fakellm.Config{TTFT: 300 * time.Millisecond})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f)}, nil)
	inFlight := make(chan error, 1)
	go func() {
		_, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
		inFlight <- err
	}()
	waitFor(t, "request in flight", func() bool { return f.Stats().InFlight == 1 })
	updated := make(chan error, 1)
	go func() {
		// vLLM's pause mode=wait holds the update until the in-flight
		// request is done.
		_, err := h.cli.UpdateWeights(ctxT(t, 5*time.Second), &rmv1.UpdateWeightsRequest{Version: 9})
		updated <- err
	}()
	waitFor(t, "update in progress", func() bool { return listBackend(t, h, "b0").GetUpdating() })
	resp, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
	if err != nil || resp.GetModelVersion() != 9 || resp.GetVersionChanged() {
		t.Errorf("request during the update: %v err %v, want it served after the update at version 9", resp, err)
	}
	if err := <-updated; err != nil {
		t.Errorf("UpdateWeights: %v", err)
	}
	if err := <-inFlight; err != nil {
		t.Errorf("in-flight request: %v", err)
	}
}

// BenchmarkHTTPFront drives the OpenAI front in front of a zero-latency
// fakellm, and fakellm directly as the baseline (benchgateway has the
// side-by-side figures; these are for profiling the gateway's own path).
func BenchmarkHTTPFront(b *testing.B) {
	f, err := fakellm.Start(context.Background(), "127.0.0.1:0", fakellm.Config{Script: []fakellm.Rule{{Match: "", Reply: "ok"}}})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	env := daemontest.Env(b)
	env.Logger = zap.NewNop()
	svc, err := New(context.Background(), Config{File: withEngine(&FileConfig{Backends: backends("vllm", f)}), OpenAIAddr: "127.0.0.1:0"}, env)
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close(context.Background())
	body := []byte(`{"model":"fake-model","messages":[{"role":"user","content":"list the files"}],"max_tokens":16}`)
	for _, target := range []struct{ name, url string }{
		{"direct", f.URL + "/v1/chat/completions"},
		{"gateway", "http://" + svc.OpenAIAddr() + "/v1/chat/completions"},
	} {
		b.Run(target.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(target.url, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
			})
		})
	}
}

// BenchmarkGRPCFront sends Chat calls one after another through the gRPC
// front to a zero-latency fakellm, as runners do: a text turn, a turn with
// one 200 KB screenshot, and a late turn of an episode that resends the
// three screenshots before it. The health check is the per-call floor of
// grpc-go and the interceptor chain. For profiling the gateway's own path
// (benchgateway has the side-by-side figures).
func BenchmarkGRPCFront(b *testing.B) {
	f, err := fakellm.Start(context.Background(), "127.0.0.1:0", fakellm.Config{Script: []fakellm.Rule{{Match: "", Reply: "ok"}}})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	env := daemontest.Env(b)
	env.Logger = zap.NewNop()
	svc, err := New(context.Background(), Config{File: &FileConfig{Backends: backends("vllm", f)}}, env)
	if err != nil {
		b.Fatal(err)
	}
	addr := daemontest.Serve(b, env, svc)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	cli := rmv1.NewModelGatewayClient(conn)
	shot := func(seed byte) *rmv1.ContentPart {
		data := append(bytes.Clone(png8), bytes.Repeat([]byte{seed, 0x17, 0xa9}, 200<<10/3)...)
		return imagePart(data, "image/png", "")
	}
	system := &rmv1.ChatMessage{Role: "system", Content: []*rmv1.ContentPart{textPart("You are a computer-use agent.")}}
	text := &rmv1.ChatRequest{Model: "fake-model", RoutingKey: "ep-1", Messages: []*rmv1.ChatMessage{system, userMsg("Open the terminal.")},
		Sampling: &rmv1.SamplingParams{MaxTokens: new(int32(16)), Temperature: new(0.0)}}
	oneShot := proto.CloneOf(text)
	oneShot.Messages[1].Content = append(oneShot.Messages[1].Content, shot(1))
	history := proto.CloneOf(text)
	history.Messages = history.Messages[:1]
	for i := range 4 {
		history.Messages = append(history.Messages,
			&rmv1.ChatMessage{Role: "user", Content: []*rmv1.ContentPart{textPart(fmt.Sprint("Step ", i)), shot(byte(i))}},
			&rmv1.ChatMessage{Role: "assistant", Content: []*rmv1.ContentPart{textPart("pyautogui.click(10, 20)")}})
	}
	history.Messages = history.Messages[:len(history.Messages)-1]
	for _, tc := range []struct {
		name string
		req  *rmv1.ChatRequest
	}{{"text", text}, {"screenshot", oneShot}, {"history-4-screenshots", history}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cli.Chat(context.Background(), tc.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("health", func(b *testing.B) {
		hc := healthpb.NewHealthClient(conn)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestUpdateAbortsInFlight(t *testing.T) {
	f := startFake(t, fakellm.Config{TTFT: 10 * time.Second})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f)}, nil)
	type result struct {
		resp *rmv1.ChatResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := h.cli.Chat(ctxT(t, 20*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
		done <- result{r, err}
	}()
	waitFor(t, "request in flight", func() bool { return f.Stats().InFlight == 1 })
	start := time.Now()
	if _, err := h.cli.UpdateWeights(ctxT(t, 5*time.Second), &rmv1.UpdateWeightsRequest{Version: 2, AbortInFlight: true}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.resp.GetChoices()[0].GetFinishReason() != "abort" || !r.resp.GetVersionChanged() {
		t.Errorf("aborted request: %v err %v, want finish_reason abort and version_changed", r.resp, r.err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("abort took %v, want well under the 10s TTFT", d)
	}
	if st := f.Stats(); st.Aborted != 1 || st.WeightVersion != "2" {
		t.Errorf("backend stats %+v, want 1 aborted and version 2", st)
	}
}
