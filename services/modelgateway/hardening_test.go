package modelgateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds/tlstest"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
)

// keyFake is a real fakellm behind a handler that records the
// Authorization header each request brings, to see which API key a backend
// was sent.
type keyFake struct {
	*fakellm.Server
	URL string

	mu    sync.Mutex
	auths []string
}

func startKeyFake(t *testing.T, cfg fakellm.Config) *keyFake {
	t.Helper()
	s, err := fakellm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k := &keyFake{Server: s}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			k.mu.Lock()
			k.auths = append(k.auths, r.Header.Get("Authorization"))
			k.mu.Unlock()
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	k.URL = srv.URL
	return k
}

func (k *keyFake) chatAuths() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.auths...)
}

// startWithToken runs the gateway as daemon.Serve does, with token required
// on gRPC, and the HTTP front given the same token.
func startWithToken(t *testing.T, fc *FileConfig, token string) *harness {
	t.Helper()
	env := daemontest.Env(t)
	svc, err := New(context.Background(), Config{File: withEngine(fc), OpenAIAddr: "127.0.0.1:0", AuthToken: token}, env)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: lis, Logger: env.Logger, Registry: env.Registry, AuthToken: token}, svc)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &harness{svc: svc, cli: rmv1.NewModelGatewayClient(conn), http: "http://" + svc.OpenAIAddr()}
}

type httpAnswer struct {
	code int
	hdr  http.Header
	body string
}

func doHTTP(t *testing.T, method, url, body string, hdr map[string]string) httpAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, 5*time.Second), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpAnswer{resp.StatusCode, resp.Header, string(b)}
}

// postWholeThenRead writes a POST of a chat body of n bytes to path on the
// server at base, with auth as its Authorization header when set, before
// it reads anything, and then reads the answer.
func postWholeThenRead(t *testing.T, base, path, auth string, n int) (httpAnswer, error) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	head, tail := `{"messages":[{"role":"user","content":"`, `"}]}`
	body := head + strings.Repeat("x", max(n-len(head)-len(tail), 0)) + tail
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, len(body))
	if auth != "" {
		req += "Authorization: " + auth + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"+body); err != nil {
		return httpAnswer{}, fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return httpAnswer{}, fmt.Errorf("read: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpAnswer{resp.StatusCode, resp.Header, string(b)}, nil
}

const chatJSON = `{"messages":[{"role":"user","content":"hi"}]}`

// TestHTTPFrontRequiresToken: with a token set, the OpenAI front refuses
// every route but /health without it, with OpenAI's 401, and nothing
// reaches the backend, which would otherwise receive the gateway's own API
// key.
func TestHTTPFrontRequiresToken(t *testing.T) {
	const token = "s3cret-token"
	f := startKeyFake(t, fakellm.Config{})
	h := startWithToken(t, &FileConfig{Backends: []BackendConfig{{ID: "b0", BaseURL: f.URL, Model: "fake-model", APIKey: "backend-key"}}}, token)

	bigBody := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 64<<10) + `"}]}`
	tests := []struct {
		name, method, path, body, auth string
		wantCode                       int
	}{
		{"chat without token", "POST", "/v1/chat/completions", chatJSON, "", 401},
		{"chat with a wrong token", "POST", "/v1/chat/completions", chatJSON, "Bearer nope", 401},
		{"chat with a token prefix", "POST", "/v1/chat/completions", chatJSON, "Bearer s3cret", 401},
		{"chat with basic auth", "POST", "/v1/chat/completions", chatJSON, "Basic czNjcmV0LXRva2Vu", 401},
		{"chat with the token as a raw header", "POST", "/v1/chat/completions", chatJSON, token, 401},
		{"big body without token", "POST", "/v1/chat/completions", bigBody, "", 401},
		{"models without token", "GET", "/v1/models", "", "", 401},
		{"unknown path without token", "GET", "/v1/secret", "", "", 401},
		{"wrong method without token", "GET", "/v1/chat/completions", "", "", 401},
		{"health without token", "GET", "/health", "", "", 200},
		{"models with token", "GET", "/v1/models", "", "Bearer " + token, 200},
		{"chat with token", "POST", "/v1/chat/completions", chatJSON, "Bearer " + token, 200},
		{"chat with lower-case scheme", "POST", "/v1/chat/completions", chatJSON, "bearer " + token, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.auth != "" {
				hdr["Authorization"] = tt.auth
			}
			got := doHTTP(t, tt.method, h.http+tt.path, tt.body, hdr)
			if got.code != tt.wantCode {
				t.Fatalf("%s %s: status %d (%s), want %d", tt.method, tt.path, got.code, got.body, tt.wantCode)
			}
			if tt.wantCode != 401 {
				return
			}
			if got.hdr.Get("WWW-Authenticate") == "" || !strings.Contains(got.body, `"code":"invalid_api_key"`) {
				t.Errorf("401 with WWW-Authenticate %q and body %s, want a Bearer challenge and OpenAI's invalid_api_key error", got.hdr.Get("WWW-Authenticate"), got.body)
			}
		})
	}
	// A caller without the token cannot make the gateway wait for, or
	// buffer, a body of megabytes: the answer comes after the headers.
	t.Run("announced big body without token", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(h.http, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 32<<20)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer before the body: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("status %d, want 401", resp.StatusCode)
		}
	})
	// A client that writes its whole request before it reads (OpenAI's
	// Python client) reads the 401 too, not a reset: the connection is
	// drained after the answer. 16 MiB is more than the sockets buffer.
	t.Run("huge body written whole without token", func(t *testing.T) {
		got, err := postWholeThenRead(t, h.http, "/v1/chat/completions", "", 16<<20)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		if got.code != 401 || !strings.Contains(got.body, `"code":"invalid_api_key"`) {
			t.Errorf("status %d %s, want 401 invalid_api_key", got.code, got.body)
		}
	})
	// Only the two authorized chats reached the backend, with the
	// backend's key, not the caller's token.
	auths := f.chatAuths()
	if len(auths) != 2 || auths[0] != "Bearer backend-key" {
		t.Errorf("backend saw chat requests with Authorization %q, want two with the backend's key", auths)
	}

	// gRPC wants the same token.
	_, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC chat without token: %v, want Unauthenticated", err)
	}
	ctx := metadata.AppendToOutgoingContext(ctxT(t, 5*time.Second), "authorization", "Bearer "+token)
	if _, err := h.cli.Chat(ctx, &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}}); err != nil {
		t.Errorf("gRPC chat with token: %v", err)
	}
}

// TestBinaryHTTPFrontTakesDaemonToken runs the binary's own daemon spec:
// the daemon's token, however it is given (flag, file, environment),
// guards the HTTP front as well as gRPC.
func TestBinaryHTTPFrontTakesDaemonToken(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "gw.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("backends: [{id: b0, base_url: %q, model: fake-model}]\n", f.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--auth-token", "tok"}, ""},
		{"file", []string{"--auth-token-file", tokenPath}, ""},
		{"environment", nil, "tok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ROLLOUTMESH_AUTH_TOKEN", tt.env)
			if tt.env == "" {
				os.Unsetenv("ROLLOUTMESH_AUTH_TOKEN")
			}
			base := runBinary(t, append([]string{"--config", cfgPath}, tt.args...))
			before := f.Stats().Requests
			if got := doHTTP(t, "POST", base+"/v1/chat/completions", chatJSON, nil); got.code != 401 {
				t.Errorf("chat without token: %d %s, want 401", got.code, got.body)
			}
			if got := doHTTP(t, "POST", base+"/v1/chat/completions", chatJSON, map[string]string{"Authorization": "Bearer tok"}); got.code != 200 {
				t.Errorf("chat with token: %d %s, want 200", got.code, got.body)
			}
			if n := f.Stats().Requests - before; n != 1 {
				t.Errorf("backend saw %d requests, want 1", n)
			}
		})
	}
}

// runBinary runs the gateway as its main does, with args after loopback
// addresses, until the test ends, and returns the HTTP front's base URL.
func runBinary(t *testing.T, args []string) string {
	t.Helper()
	spec := Spec()
	started := make(chan *Service, 1)
	start := spec.Start
	spec.Start = func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
		svc, err := start(ctx, env)
		if s, ok := svc.(*Service); ok {
			started <- s
		}
		return svc, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, spec, append([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "", "--openai-addr", "127.0.0.1:0",
			"--log-level", "error"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon.Run: %v", err)
		}
	})
	select {
	case svc := <-started:
		return "http://" + svc.OpenAIAddr()
	case err := <-done:
		t.Fatalf("daemon.Run ended early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not start")
	}
	return ""
}

// TestRequestBounds: integers, ranges, counts and image data a caller sets
// are refused at the gateway, on both fronts, naming the field; none of
// these requests reaches the backend.
func TestRequestBounds(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f), Limits: Limits{MaxMessages: 3, MaxImages: 2}}, nil)
	msgs := []*rmv1.ChatMessage{userMsg("x")}
	imgMsg := func(urls ...string) []*rmv1.ChatMessage {
		m := &rmv1.ChatMessage{Role: "user"}
		for _, u := range urls {
			m.Content = append(m.Content, &rmv1.ContentPart{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{Url: u}}})
		}
		return []*rmv1.ChatMessage{m}
	}
	const png1 = "data:image/png;base64,iVBORw0KGgo="
	grpcTests := []struct {
		name      string
		req       *rmv1.ChatRequest
		wantField string
	}{
		{"negative max_tokens", &rmv1.ChatRequest{Messages: msgs, Sampling: &rmv1.SamplingParams{MaxTokens: new(int32(-5))}}, "sampling.max_tokens"},
		{"huge max_tokens", &rmv1.ChatRequest{Messages: msgs, Sampling: &rmv1.SamplingParams{MaxTokens: new(int32(math.MaxInt32))}}, "sampling.max_tokens"},
		{"NaN temperature", &rmv1.ChatRequest{Messages: msgs, Sampling: &rmv1.SamplingParams{Temperature: new(math.NaN())}}, "sampling.temperature"},
		{"NaN top_p", &rmv1.ChatRequest{Messages: msgs, Sampling: &rmv1.SamplingParams{TopP: new(math.NaN())}}, "sampling.top_p"},
		{"infinite penalty", &rmv1.ChatRequest{Messages: msgs, Sampling: &rmv1.SamplingParams{PresencePenalty: new(math.Inf(1))}}, "sampling.presence_penalty"},
		{"huge top_k", &rmv1.ChatRequest{Messages: msgs, Sampling: &rmv1.SamplingParams{TopK: new(int32(math.MaxInt32))}}, "sampling.top_k"},
		{"n 17", &rmv1.ChatRequest{Messages: msgs, Sampling: &rmv1.SamplingParams{N: 17}}, "sampling.n"},
		{"long stop", &rmv1.ChatRequest{Messages: msgs, Sampling: &rmv1.SamplingParams{Stop: []string{strings.Repeat("s", 2000)}}}, "sampling.stop[0]"},
		{"top_logprobs 21", &rmv1.ChatRequest{Messages: msgs, Logprobs: true, TopLogprobs: 21}, "top_logprobs"},
		{"too many messages", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("a"), userMsg("b"), userMsg("c"), userMsg("d")}}, "messages"},
		{"too many images", &rmv1.ChatRequest{Messages: imgMsg(png1, png1, png1)}, "messages[0].content[2].image"},
		{"invalid base64 image", &rmv1.ChatRequest{Messages: imgMsg("data:image/png;base64,!!!notbase64!!")}, "messages[0].content[0].image.url"},
		{"unpadded base64 image", &rmv1.ChatRequest{Messages: imgMsg("data:image/png;base64,iVBORw0KGgo")}, "messages[0].content[0].image.url"},
		{"data URL not base64", &rmv1.ChatRequest{Messages: imgMsg("data:image/png,rawbytes")}, "messages[0].content[0].image.url"},
		{"data URL not an image", &rmv1.ChatRequest{Messages: imgMsg("data:text/plain;base64,aGk=")}, "messages[0].content[0].image.url"},
		{"extra body max_tokens", &rmv1.ChatRequest{Messages: msgs, ExtraBodyJson: `{"max_tokens": -5}`}, "extra_body_json.max_tokens"},
		{"extra body n", &rmv1.ChatRequest{Messages: msgs, ExtraBodyJson: `{"n": 1000}`}, "extra_body_json.n"},
		{"extra body replaces the model", &rmv1.ChatRequest{Messages: msgs, ExtraBodyJson: `{"model": "other"}`}, "extra_body_json.model"},
		{"extra body streams", &rmv1.ChatRequest{Messages: msgs, ExtraBodyJson: `{"stream": true}`}, "extra_body_json.stream"},
		// Backends keep the last of two equal names, the checks saw the first.
		{"extra body names max_tokens twice", &rmv1.ChatRequest{Messages: msgs, ExtraBodyJson: `{"max_tokens": 1, "max_tokens": 999999999}`}, "extra_body_json.max_tokens"},
		{"extra body names a member twice deeper", &rmv1.ChatRequest{Messages: msgs, ExtraBodyJson: `{"response_format": {"type": "json_object", "type": "text"}}`}, "extra_body_json.response_format.type"},
		{"too many tools", &rmv1.ChatRequest{Messages: msgs, Tools: manyTools(maxTools + 1)}, "tools"},
	}
	for _, tt := range grpcTests {
		t.Run("grpc "+tt.name, func(t *testing.T) {
			_, err := h.cli.Chat(ctxT(t, 5*time.Second), tt.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.wantField+":") {
				t.Errorf("err = %v, want InvalidArgument naming %s", err, tt.wantField)
			}
		})
	}

	user := `{"role":"user","content":"x"}`
	img := func(url string) string {
		return `{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + url + `"}}]}`
	}
	httpTests := []struct {
		name, body, wantField string
	}{
		{"negative max_tokens", `{"max_tokens":-5,"messages":[` + user + `]}`, "max_tokens"},
		{"fractional max_tokens", `{"max_tokens":1.5,"messages":[` + user + `]}`, "max_tokens"},
		{"max_tokens as a string", `{"max_tokens":"5","messages":[` + user + `]}`, "max_tokens"},
		{"huge max_completion_tokens", `{"max_completion_tokens":1e300,"messages":[` + user + `]}`, "max_completion_tokens"},
		{"n 100", `{"n":100,"messages":[` + user + `]}`, "n"},
		{"temperature 3", `{"temperature":3,"messages":[` + user + `]}`, "temperature"},
		{"top_p 0", `{"top_p":0,"messages":[` + user + `]}`, "top_p"},
		{"top_logprobs 50", `{"logprobs":true,"top_logprobs":50,"messages":[` + user + `]}`, "top_logprobs"},
		{"too many stops", `{"stop":["a","b","c","d","e","f","g","h","i"],"messages":[` + user + `]}`, "stop"},
		{"too many messages", `{"messages":[` + strings.Repeat(user+",", 3) + user + `]}`, "messages"},
		{"too many images", `{"messages":[` + img(png1) + "," + img(png1) + "," + img(png1) + `]}`, "messages[2].content[0]"},
		{"invalid base64 image", `{"messages":[` + img("data:image/png;base64,!!!notbase64!!") + `]}`, "messages[0].content[0].image_url.url"},
		{"data URL without base64", `{"messages":[` + img("data:image/png,raw") + `]}`, "messages[0].content[0].image_url.url"},
		{"bare image URL with invalid base64", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"data:image/png;base64,!!"}]}]}`, "messages[0].content[0].image_url"},
		{"image URL object without url", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"detail":"low"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"image embeddings", `{"messages":[{"role":"user","content":[{"type":"image_embeds","image_embeds":"UEsDBA=="}]}]}`, "messages[0].content[0]"},
		// A body whose meaning depends on the parser: backends keep the last
		// of two equal names, fastjson's lookups found the first, so the
		// second value reached the backend unchecked.
		{"max_tokens twice", `{"max_tokens":16,"max_tokens":999999999,"messages":[` + user + `]}`, "max_tokens"},
		{"messages twice, image embeddings in the second", `{"messages":[` + user + `],"messages":[{"role":"user","content":[{"type":"image_embeds","image_embeds":"UEsDBA=="}]}]}`, "messages"},
		{"image URL twice in a part", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + png1 + `","url":"data:image/png;base64,!!"}}]}]}`, "messages[0].content[0].image_url.url"},
	}
	for _, tt := range httpTests {
		t.Run("http "+tt.name, func(t *testing.T) {
			got := doHTTP(t, "POST", h.http+"/v1/chat/completions", tt.body, nil)
			if got.code != 400 || !strings.Contains(got.body, `"param":"`+tt.wantField+`"`) {
				t.Errorf("status %d body %s, want 400 naming %s", got.code, got.body, tt.wantField)
			}
		})
	}
	if got := doHTTP(t, "POST", h.http+"/v1/chat/completions", chatJSON, map[string]string{"X-Routing-Key": strings.Repeat("k", 300)}); got.code != 400 || !strings.Contains(got.body, "X-Routing-Key") {
		t.Errorf("long routing key: %d %s, want 400 naming X-Routing-Key", got.code, got.body)
	}
	if n := f.Stats().Requests; n != 0 {
		t.Errorf("backend saw %d requests, want none", n)
	}

	// Requests at the bounds pass.
	if _, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: imgMsg(png1, png1), Sampling: &rmv1.SamplingParams{MaxTokens: new(int32(16)), N: 2}, ExtraBodyJson: `{"top_k": 5}`}); err != nil {
		t.Errorf("gRPC request at the bounds: %v", err)
	}
	if got := doHTTP(t, "POST", h.http+"/v1/chat/completions", `{"max_tokens":16,"n":2,"temperature":0,"top_p":1,"messages":[`+img(png1)+","+user+`]}`, nil); got.code != 200 {
		t.Errorf("HTTP request at the bounds: %d %s", got.code, got.body)
	}
}

func manyTools(n int) []*rmv1.Tool {
	out := make([]*rmv1.Tool, n)
	for i := range out {
		out[i] = &rmv1.Tool{Name: fmt.Sprintf("t%d", i)}
	}
	return out
}

// TestErrorsStayShort: an error never runs to kilobytes, whatever the
// caller sent: a deeply nested body, a long path, a long model name.
func TestErrorsStayShort(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f)}, nil)
	const maxLen = 1024
	nested := `{"messages":[{"role":"user","content":"x"}],"x":` + strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000) + "}"
	long := strings.Repeat("m", 100000)
	httpTests := []struct {
		name, method, path, body string
		wantCode                 int
	}{
		{"deeply nested JSON", "POST", "/v1/chat/completions", nested, 400},
		{"deeply nested arrays", "POST", "/v1/chat/completions", strings.Repeat("[", 10000), 400},
		{"long model name", "POST", "/v1/chat/completions", `{"model":"` + long + `","messages":[{"role":"user","content":"x"}]}`, 404},
		{"long path", "GET", "/" + strings.Repeat("p", 8000), "", 404},
	}
	for _, tt := range httpTests {
		t.Run("http "+tt.name, func(t *testing.T) {
			got := doHTTP(t, tt.method, h.http+tt.path, tt.body, nil)
			if got.code != tt.wantCode || len(got.body) > maxLen {
				t.Errorf("status %d, %d-byte body %.200s...; want %d and at most %d bytes", got.code, len(got.body), got.body, tt.wantCode, maxLen)
			}
		})
	}
	grpcTests := []struct {
		name     string
		req      *rmv1.ChatRequest
		wantCode codes.Code
	}{
		{"long model name", &rmv1.ChatRequest{Model: long, Messages: []*rmv1.ChatMessage{userMsg("x")}}, codes.NotFound},
		{"long role", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: long}}}, codes.InvalidArgument},
		{"long tool choice", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, ToolChoice: long}, codes.InvalidArgument},
		{"nested extra body", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, ExtraBodyJson: strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)}, codes.InvalidArgument},
	}
	for _, tt := range grpcTests {
		t.Run("grpc "+tt.name, func(t *testing.T) {
			_, err := h.cli.Chat(ctxT(t, 5*time.Second), tt.req)
			if st := status.Convert(err); st.Code() != tt.wantCode || len(st.Message()) > maxLen {
				t.Errorf("code %v, %d-byte message %.200s...; want %v and at most %d bytes", st.Code(), len(st.Message()), st.Message(), tt.wantCode, maxLen)
			}
		})
	}
}

// TestUpdateWeightsBounds: versions a caller sets stay in [1, 2^53-1], and
// a refused one leaves updates working.
func TestUpdateWeightsBounds(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f)}, nil)
	tests := []struct {
		name string
		req  *rmv1.UpdateWeightsRequest
		want string
	}{
		{"max int64", &rmv1.UpdateWeightsRequest{Version: math.MaxInt64}, "version"},
		{"2^53", &rmv1.UpdateWeightsRequest{Version: 1 << 53}, "version"},
		{"negative", &rmv1.UpdateWeightsRequest{Version: -1}, "version"},
		{"unknown strategy", &rmv1.UpdateWeightsRequest{Version: 5, Strategy: 99}, "strategy"},
		{"long source", &rmv1.UpdateWeightsRequest{Version: 5, Source: strings.Repeat("s", 5000)}, "source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.cli.UpdateWeights(ctxT(t, 5*time.Second), tt.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want+":") {
				t.Errorf("err = %v, want InvalidArgument naming %s", err, tt.want)
			}
		})
	}
	res, err := h.cli.UpdateWeights(ctxT(t, 5*time.Second), &rmv1.UpdateWeightsRequest{Version: MaxVersion})
	if err != nil || res.GetVersion() != MaxVersion {
		t.Fatalf("update to the largest version: %v, %v", res, err)
	}
	if _, err := ParseConfig([]byte("initial_version: 9007199254740992\nbackends: [{id: a, base_url: 'http://x', model: m}]")); err == nil || !strings.Contains(err.Error(), "initial_version") {
		t.Errorf("initial_version 2^53: err %v, want one naming initial_version", err)
	}
}

// mkfifo makes a named pipe: opening it for reading would wait for a
// writer, reading it would wait for data, for ever.
func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return p
}

// TestReadersRefuseNonRegularFiles: the config, a backend's api_key_file
// and fakellm's script are read with a cap and only from regular files: a
// FIFO or /dev/zero is refused at once instead of hanging or filling
// memory.
func TestReadersRefuseNonRegularFiles(t *testing.T) {
	fifo := mkfifo(t)
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, make([]byte, 17<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := func(path string) error {
		_, err := New(context.Background(), Config{File: &FileConfig{Backends: []BackendConfig{{ID: "b", BaseURL: "http://127.0.0.1:1", Model: "m", APIKeyFile: path}}}}, daemontest.Env(t))
		return err
	}
	script := func(path string) error { _, err := fakellm.LoadScript(path); return err }
	config := func(path string) error { _, err := LoadFile(path); return err }
	tests := []struct {
		name string
		read func(string) error
		path string
		want error
	}{
		{"config from a FIFO", config, fifo, boundedread.ErrNotRegular},
		{"config from /dev/zero", config, "/dev/zero", boundedread.ErrNotRegular},
		{"config too large", config, big, boundedread.ErrTooLarge},
		{"api key from a FIFO", keyFile, fifo, boundedread.ErrNotRegular},
		{"api key from /dev/zero", keyFile, "/dev/zero", boundedread.ErrNotRegular},
		{"api key too large", keyFile, big, boundedread.ErrTooLarge},
		{"script from a FIFO", script, fifo, boundedread.ErrNotRegular},
		{"script from /dev/zero", script, "/dev/zero", boundedread.ErrNotRegular},
		{"script too large", script, big, boundedread.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errc := make(chan error, 1)
			go func() { errc <- tt.read(tt.path) }()
			select {
			case err := <-errc:
				if !errors.Is(err, tt.want) {
					t.Errorf("read %s: %v, want %v", tt.path, err, tt.want)
				}
			// A hang is for ever; the bound is wide because CI runs
			// many packages at once on two cores.
			case <-time.After(30 * time.Second):
				t.Fatalf("read %s still running after 30s", tt.path)
			}
		})
	}
}

// TestStreamCappedAtMaxResponseBytes: a streamed answer is relayed up to
// max_response_bytes and then cut, as an answer read whole is refused over
// it; a backend cannot make the gateway relay without end.
func TestStreamCappedAtMaxResponseBytes(t *testing.T) {
	long := strings.TrimSpace(strings.Repeat("word ", 2000))
	f := startFake(t, fakellm.Config{Script: script(t, `{"match": "", "reply": "`+long+`"}`)})
	const limit = 8 << 10
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f), Limits: Limits{MaxResponseBytes: limit}}, nil)
	resp, err := postJSON(t, ctxT(t, 10*time.Second), h.http+"/v1/chat/completions", map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "hi"}}, "stream": true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		n += len(sc.Bytes()) + 1
		done = done || sc.Text() == "data: [DONE]"
	}
	// One read from the backend may go past the limit.
	if done || n > limit+64<<10 {
		t.Errorf("stream of %d bytes, [DONE] %v; want one cut near %d bytes", n, done, limit)
	}
	if n < limit/2 {
		t.Errorf("stream of %d bytes, want about %d relayed before the cut", n, limit)
	}
}

// TestAPIKeyNeverShown: a backend's key, from a file, reaches the backend
// and nothing else: not ListBackends, not the logs, not an error.
func TestAPIKeyNeverShown(t *testing.T) {
	const key = "sk-very-secret-key"
	f := startKeyFake(t, fakellm.Config{Faults: fakellm.Faults{ErrorRate: 1}})
	keyPath := filepath.Join(t.TempDir(), "key")
	os.WriteFile(keyPath, []byte(key+"\n"), 0o600)
	var logs lockedBuilder
	env := daemontest.Env(t)
	env.Logger = newLogCapture(t, &logs)
	svc, err := New(context.Background(), Config{File: &FileConfig{
		Backends: []BackendConfig{{ID: "b0", BaseURL: f.URL, Model: "fake-model", APIKeyFile: keyPath}},
		Retry:    RetryConfig{MaxAttempts: 1},
	}, OpenAIAddr: "127.0.0.1:0"}, env)
	if err != nil {
		t.Fatal(err)
	}
	addr := daemontest.Serve(t, env, svc)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cli := rmv1.NewModelGatewayClient(conn)
	_, chatErr := cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
	if chatErr == nil {
		t.Fatal("chat against a failing backend succeeded")
	}
	list, err := cli.ListBackends(ctxT(t, 5*time.Second), &rmv1.ListBackendsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if auths := f.chatAuths(); len(auths) != 1 || auths[0] != "Bearer "+key {
		t.Errorf("backend saw Authorization %q, want the key from the file", auths)
	}
	for what, text := range map[string]string{"ListBackends": prototext.Format(list), "chat error": chatErr.Error(), "logs": logs.String()} {
		if strings.Contains(text, key) {
			t.Errorf("%s shows the API key: %s", what, text)
		}
	}
	// A key file whose content cannot be a header value is refused
	// without quoting it.
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("sk-a\r\nX-Injected: 1"), 0o600)
	_, err = New(context.Background(), Config{File: &FileConfig{Backends: []BackendConfig{{ID: "b", BaseURL: "http://127.0.0.1:1", Model: "m", APIKeyFile: bad}}}}, daemontest.Env(t))
	if err == nil || strings.Contains(err.Error(), "sk-a") {
		t.Errorf("key with a line break: err %v, want a refusal that does not quote it", err)
	}
}

// lockedBuilder is a strings.Builder the logger's goroutines may share.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) Sync() error { return nil }

// newLogCapture logs at debug level into lb as well as to t.
func newLogCapture(t *testing.T, lb *lockedBuilder) *zap.Logger {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewDevelopmentEncoderConfig()), lb, zap.DebugLevel)
	return zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
}

// TestUpdateWeightsBoundedWithoutDeadline: an UpdateWeights call without a
// deadline still ends when a backend takes the pause and never answers,
// instead of holding this update, and every later one, for ever.
func TestUpdateWeightsBoundedWithoutDeadline(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/pause" {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hang.Close)
	h := startGateway(t, &FileConfig{
		Backends: []BackendConfig{{ID: "b0", BaseURL: hang.URL, Model: "fake-model"}},
		Limits:   Limits{RequestTimeout: 300 * time.Millisecond},
	}, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := h.cli.UpdateWeights(context.Background(), &rmv1.UpdateWeightsRequest{Version: 1})
		errc <- err
	}()
	select {
	case err := <-errc:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("update against a hanging backend: %v, want Unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("UpdateWeights without a deadline still running after 10s")
	}
}

// TestOpenFrontWarned: an HTTP front without a token that other hosts can
// reach is logged as a warning at start; on loopback, or with a token, not.
func TestOpenFrontWarned(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	tests := []struct {
		name, addr, token string
		wantWarn          bool
	}{
		{"all interfaces, no token", "0.0.0.0:0", "", true},
		{"all interfaces, token", "0.0.0.0:0", "t", false},
		{"loopback, no token", "127.0.0.1:0", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			env := daemontest.Env(t)
			env.Logger = zap.New(core)
			svc, err := New(context.Background(), Config{File: withEngine(&FileConfig{Backends: backends("vllm", f)}), OpenAIAddr: tt.addr, AuthToken: tt.token}, env)
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close(context.Background())
			got := logs.FilterMessageSnippet("without a token").Len() > 0
			if got != tt.wantWarn {
				t.Errorf("warned %v, want %v (logs %v)", got, tt.wantWarn, logs.All())
			}
		})
	}
}

// TestCloseRightAfterNew: a gateway closed at once after it started stops,
// even when its HTTP front had not begun to accept yet.
func TestCloseRightAfterNew(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	for i := range 50 {
		svc, err := New(context.Background(), Config{File: withEngine(&FileConfig{Backends: backends("vllm", f)}), OpenAIAddr: "127.0.0.1:0"}, daemontest.Env(t))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			svc.Close(context.Background())
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("Close right after New, round %d: still running after 30s", i)
		}
	}
}

// TestHTTPFrontServesTLS: with the daemon's TLS flags the HTTP front is
// served over TLS too, so the token gRPC carries encrypted does not cross
// the network in clear to the other front.
func TestHTTPFrontServesTLS(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	p := tlstest.New(t)
	cfgPath := filepath.Join(t.TempDir(), "gw.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("backends: [{id: b0, base_url: %q, model: fake-model}]\n", f.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := runBinary(t, []string{"--config", cfgPath, "--auth-token", "tok", "--tls-cert", p.ServerCert, "--tls-key", p.ServerKey})
	addr := strings.TrimPrefix(base, "http://")
	caPEM, err := os.ReadFile(p.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	httpsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer httpsClient.CloseIdleConnections()
	post := func(c *http.Client, url, auth string) (int, error) {
		req, _ := http.NewRequestWithContext(ctxT(t, 5*time.Second), "POST", url, strings.NewReader(chatJSON))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(httpsClient, "https://"+addr+"/v1/chat/completions", "Bearer tok"); err != nil || code != 200 {
		t.Errorf("HTTPS chat with token: %d, %v; want 200", code, err)
	}
	if code, err := post(httpsClient, "https://"+addr+"/v1/chat/completions", ""); err != nil || code != 401 {
		t.Errorf("HTTPS chat without token: %d, %v; want 401", code, err)
	}
	if code, err := post(http.DefaultClient, "http://"+addr+"/v1/chat/completions", "Bearer tok"); err == nil && code == 200 {
		t.Errorf("plain HTTP chat answered 200, want the front to speak only TLS")
	}
	if n := f.Stats().Requests; n != 1 {
		t.Errorf("backend saw %d requests, want 1", n)
	}
}

// TestTLSClientGoneCancelsBackend: over TLS as in plain HTTP, a client that
// goes away mid-request has its backend request cancelled: the watcher
// looks at the socket under the TLS connection.
func TestTLSClientGoneCancelsBackend(t *testing.T) {
	f := startFake(t, fakellm.Config{TTFT: time.Minute})
	p := tlstest.New(t)
	cfgPath := filepath.Join(t.TempDir(), "gw.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("backends: [{id: b0, base_url: %q, model: fake-model}]\n", f.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := runBinary(t, []string{"--config", cfgPath, "--tls-cert", p.ServerCert, "--tls-key", p.ServerKey})
	caPEM, _ := os.ReadFile(p.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ctx, cancel := context.WithCancel(context.Background())
	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", "https://"+strings.TrimPrefix(base, "http://")+"/v1/chat/completions", strings.NewReader(chatJSON))
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	waitFor(t, "request in flight at the backend", func() bool { return f.Stats().InFlight == 1 })
	cancel()
	if err := <-answered; err == nil {
		t.Error("cancelled request answered")
	}
	waitFor(t, "cancellation at the backend", func() bool { return f.Stats().Canceled == 1 })
}

// TestAnswerCappedAtMaxResponseBytes: an answer read whole from a backend
// is refused over max_response_bytes on both fronts, not buffered.
func TestAnswerCappedAtMaxResponseBytes(t *testing.T) {
	long := strings.TrimSpace(strings.Repeat("word ", 4000))
	f := startFake(t, fakellm.Config{Script: script(t, `{"match": "", "reply": "`+long+`"}`)})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f), Limits: Limits{MaxResponseBytes: 8 << 10}}, nil)
	_, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "limit") || len(st.Message()) > 1024 {
		t.Errorf("gRPC chat with a long answer: %v, want a short Unavailable naming the limit", err)
	}
	if got := doHTTP(t, "POST", h.http+"/v1/chat/completions", chatJSON, nil); got.code != http.StatusBadGateway || len(got.body) > 1024 {
		t.Errorf("HTTP chat with a long answer: %d, %d bytes; want a short 502", got.code, len(got.body))
	}
}

// TestHTTPRequestTimeoutAndClose: an HTTP request is bounded by
// limits.request_timeout (504, and the backend sees it cancelled), and
// closing the front ends the requests in flight at their backends.
func TestHTTPRequestTimeoutAndClose(t *testing.T) {
	f := startFake(t, fakellm.Config{TTFT: time.Minute})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f), Limits: Limits{RequestTimeout: 300 * time.Millisecond}}, nil)
	msgs := []map[string]any{{"role": "user", "content": "x"}}
	start := time.Now()
	resp, err := postJSON(t, ctxT(t, 10*time.Second), h.http+"/v1/chat/completions", map[string]any{"messages": msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("request past the timeout answered %d, want 504", resp.StatusCode)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("request with a 300ms timeout took %v", d)
	}
	waitFor(t, "timed-out request cancelled at the backend", func() bool { return f.Stats().Canceled == 1 })

	f2 := startFake(t, fakellm.Config{TTFT: time.Minute})
	h2 := startGateway(t, &FileConfig{Backends: backends("vllm", f2)}, nil)
	answered := make(chan error, 1)
	go func() {
		resp, err := postJSON(t, ctxT(t, 10*time.Second), h2.http+"/v1/chat/completions", map[string]any{"messages": msgs, "stream": true}, nil)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		answered <- err
	}()
	waitFor(t, "streamed request in flight", func() bool { return f2.Stats().InFlight == 1 })
	h2.svc.openai.Close()
	waitFor(t, "request ended at the backend by Close", func() bool { return f2.Stats().Canceled == 1 })
	select {
	case <-answered:
	case <-time.After(30 * time.Second):
		t.Error("client still waiting 30s after Close")
	}
}
