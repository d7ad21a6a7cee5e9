package modelgateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
)

// fuzzToken is the token the fuzzed gateway's HTTP front requires.
const fuzzToken = "fuzz-token"

// fuzzGateway is a real gateway, its gRPC server with the real interceptor
// chain on an in-memory listener, its HTTP front on loopback, and a real
// fakellm backend on loopback: what a caller reaches, without the network.
type fuzzGateway struct {
	svc  *Service
	fake *fakellm.Instance
	cli  rmv1.ModelGatewayClient
	http string // host:port of the HTTP front
	// execs counts inputs, to check the service's health every so often.
	execs atomic.Int64
	// conn is the HTTP connection the last request left open, br its
	// reader.
	conn net.Conn
	br   *bufio.Reader
}

func startFuzzGateway(f *testing.F) *fuzzGateway {
	f.Helper()
	fake, err := fakellm.Start(context.Background(), "127.0.0.1:0", fakellm.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { fake.Close() })
	env := daemon.Env{Logger: zap.NewNop(), Registry: daemon.NewRegistry()}
	svc, err := New(context.Background(), Config{
		File: withEngine(&FileConfig{
			Backends: []BackendConfig{{ID: "b0", BaseURL: fake.URL, Model: "fake-model"}},
			Limits:   Limits{MaxImageBytes: 64 << 10, MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20, RequestTimeout: 5 * time.Second},
		}),
		OpenAIAddr: "127.0.0.1:0",
		AuthToken:  fuzzToken,
	}, env)
	if err != nil {
		f.Fatal(err)
	}
	srv, err := grpcserver.New(grpcserver.Options{Logger: env.Logger, Registry: env.Registry, Validate: svc.ValidateRequest})
	if err != nil {
		f.Fatal(err)
	}
	svc.Register(srv.GRPC)
	srv.Ready()
	lis := bufconn.Listen(1 << 20)
	go srv.GRPC.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.Fatal(err)
	}
	g := &fuzzGateway{svc: svc, fake: fake, cli: rmv1.NewModelGatewayClient(conn), http: svc.OpenAIAddr()}
	f.Cleanup(func() {
		if g.conn != nil {
			g.conn.Close()
		}
		conn.Close()
		srv.GRPC.Stop()
		svc.Close(context.Background())
	})
	return g
}

// checkHealthy asks for a plain chat on both fronts every 64 inputs: a
// bad input must leave the gateway serving, its backend's breaker closed.
func (g *fuzzGateway) checkHealthy(t *testing.T) {
	if g.execs.Add(1)%64 != 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := g.cli.Chat(ctx, &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("still there?")}}); err != nil {
		t.Fatalf("gRPC chat after the input: %v", err)
	}
	if code, body := g.rawHTTP(t, "POST", "/v1/chat/completions", "Bearer "+fuzzToken, []byte(chatJSON)); code != 200 {
		t.Fatalf("HTTP chat after the input: %d %s", code, body)
	}
}

// rawHTTP sends one request, written by hand so that method, path and
// header go as they are, on the connection the last one left open (a new
// one when the server closed it: dialling for every input cost more than
// the request), and returns the status and body of the answer.
func (g *fuzzGateway) rawHTTP(t *testing.T, method, path, auth string, body []byte) (int, []byte) {
	resp, b, reused, err := g.roundTrip(method, path, auth, body)
	if err != nil && reused {
		// The server had closed the kept connection; a new one decides.
		resp, b, _, err = g.roundTrip(method, path, auth, body)
	}
	if err != nil {
		t.Fatalf("%s %q: no answer: %v", method, path, err)
	}
	if resp.Header.Get("X-Backend") == "" && resp.StatusCode >= 400 && len(b) > 1024 {
		t.Fatalf("%s %q: the gateway's own error is %d bytes: %.200s", method, path, len(b), b)
	}
	return resp.StatusCode, b
}

func (g *fuzzGateway) roundTrip(method, path, auth string, body []byte) (resp *http.Response, b []byte, reused bool, err error) {
	if g.conn == nil {
		if g.conn, err = net.Dial("tcp", g.http); err != nil {
			return nil, nil, false, err
		}
		g.br = bufio.NewReader(g.conn)
	} else {
		reused = true
	}
	defer func() {
		if err != nil || resp.Close {
			g.conn.Close()
			g.conn = nil
		}
	}()
	g.conn.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: gw\r\n", method, path)
	if auth != "" {
		fmt.Fprintf(&req, "Authorization: %s\r\n", auth)
	}
	fmt.Fprintf(&req, "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := io.WriteString(g.conn, req.String()); err != nil {
		return nil, nil, reused, err
	}
	g.conn.Write(body) // the server may answer and close before reading it all
	if resp, err = http.ReadResponse(g.br, &http.Request{Method: method}); err != nil {
		return nil, nil, reused, err
	}
	defer resp.Body.Close()
	if b, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
		return nil, nil, reused, err
	}
	if len(b) == 1<<20 {
		resp.Close = true // the rest is unread: start afresh
	}
	return resp, b, reused, nil
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzGRPC sends request messages built from the input to the gateway's
// RPCs, through the real interceptor chain (recovery, auth, validation):
// the low bits of sel choose the RPC, the bytes are the message. A bad
// request is the caller's fault, never Internal or Unknown, and leaves the
// gateway serving.
func FuzzGRPC(f *testing.F) {
	g := startFuzzGateway(f)
	f.Add(byte(0), mustMarshal(&rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("hi")}, RoutingKey: "ep1"}))
	f.Add(byte(0), mustMarshal(&rmv1.ChatRequest{
		Messages: []*rmv1.ChatMessage{{Role: "user", Content: []*rmv1.ContentPart{{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{Url: "data:image/png;base64,iVBORw0KGgo="}}}}}},
		Sampling: &rmv1.SamplingParams{MaxTokens: new(int32(8)), Temperature: new(0.5), Stop: []string{"x"}, N: 2},
		Logprobs: true, TopLogprobs: 2, ReturnTokenIds: true, ExtraBodyJson: `{"top_k":5}`,
	}))
	f.Add(byte(0), mustMarshal(&rmv1.ChatRequest{
		Messages:   []*rmv1.ChatMessage{userMsg("x"), {Role: "assistant", ToolCalls: []*rmv1.ToolCall{{Id: "c1", Name: "click", ArgumentsJson: `{"x":1}`}}}, {Role: "tool", ToolCallId: "c1", Content: []*rmv1.ContentPart{{Part: &rmv1.ContentPart_Text{Text: "ok"}}}}},
		Tools:      []*rmv1.Tool{{Name: "click", ParametersJson: `{"type":"object"}`}},
		ToolChoice: "click",
	}))
	f.Add(byte(0), mustMarshal(&rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, Sampling: &rmv1.SamplingParams{MaxTokens: new(int32(-5))}}))
	// Values random bytes seldom make: JSON has no NaN, and the body
	// could not be written (an Internal error before the bounds).
	f.Add(byte(0), mustMarshal(&rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, Sampling: &rmv1.SamplingParams{
		Temperature: new(math.NaN()), TopP: new(math.Inf(1)), MaxTokens: new(int32(math.MaxInt32)),
	}}))
	f.Add(byte(0), mustMarshal(&rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, Sampling: &rmv1.SamplingParams{TopP: new(math.NaN())}}))
	f.Add(byte(1), mustMarshal(&rmv1.UpdateWeightsRequest{Version: 1, Source: "/ckpt/1", Strategy: rmv1.UpdateStrategy_UPDATE_STRATEGY_ROLLING}))
	f.Add(byte(1), mustMarshal(&rmv1.UpdateWeightsRequest{Version: 1 << 62, AbortInFlight: true}))
	f.Add(byte(2), []byte{})
	f.Fuzz(func(t *testing.T, sel byte, raw []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		switch sel % 3 {
		case 0:
			req := new(rmv1.ChatRequest)
			if proto.Unmarshal(raw, req) != nil {
				return
			}
			_, err = g.cli.Chat(ctx, req)
		case 1:
			req := new(rmv1.UpdateWeightsRequest)
			if proto.Unmarshal(raw, req) != nil {
				return
			}
			_, err = g.cli.UpdateWeights(ctx, req)
		case 2:
			req := new(rmv1.ListBackendsRequest)
			if proto.Unmarshal(raw, req) != nil {
				return
			}
			_, err = g.cli.ListBackends(ctx, req)
		}
		if c := status.Code(err); c == codes.Internal || c == codes.Unknown || c == codes.DeadlineExceeded {
			t.Fatalf("RPC %d: %v; want a success or the caller's error", sel%3, err)
		}
		if st := status.Convert(err); len(st.Message()) > 2048 {
			t.Fatalf("RPC %d: a %d-byte error message", sel%3, len(st.Message()))
		}
		g.checkHealthy(t)
	})
}

// FuzzHTTPFront sends requests built from the input to the OpenAI HTTP
// front over a real connection: sel chooses the method and whether the
// token, nothing or the input's auth string goes in Authorization. A
// request without the token never reaches the backend; no request gets a
// 500 or a long error of the gateway's own; the front keeps serving.
func FuzzHTTPFront(f *testing.F) {
	g := startFuzzGateway(f)
	f.Add(byte(0), "/v1/chat/completions", "", []byte(chatJSON))
	f.Add(byte(1), "/v1/chat/completions", "", []byte(`{"model":"fake-model","max_tokens":-5,"messages":[{"role":"user","content":"x"}]}`))
	f.Add(byte(1), "/v1/chat/completions", "", []byte(`{"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`))
	f.Add(byte(1), "/v1/chat/completions", "", []byte(`{"messages":[{"role":"user","content":"x"}],"a":`+strings.Repeat("[", 400)))
	f.Add(byte(10), "/v1/chat/completions", "", []byte(chatJSON))            // POST, no token
	f.Add(byte(20), "/v1/chat/completions", "Bearer nope", []byte(chatJSON)) // POST, a wrong token
	f.Add(byte(11), "/v1/models", "Bearer nope", []byte{})
	f.Add(byte(5), "/health", "", []byte{})
	f.Add(byte(2), "/v1/chat/completions/../models", "", []byte{})
	methods := []string{"POST", "GET", "HEAD", "PUT", "OPTIONS"}
	f.Fuzz(func(t *testing.T, sel byte, path, auth string, body []byte) {
		// Keep the request line and headers whole: the request, not
		// fasthttp's parser, is under test.
		noEOL := strings.NewReplacer("\r", "_", "\n", "_")
		path = "/" + strings.TrimPrefix(strings.ReplaceAll(noEOL.Replace(path), " ", "_"), "/")
		method := methods[int(sel)%len(methods)]
		switch (sel / 8) % 3 {
		case 0:
			auth = "Bearer " + fuzzToken
		case 1:
			auth = ""
		default:
			auth = noEOL.Replace(auth)
		}
		// Without the token in it, no header can be the token.
		mayPass := strings.Contains(auth, fuzzToken)
		before := g.fake.Stats().Requests
		code, _ := g.rawHTTP(t, method, path, auth, body)
		if code >= 500 && code != http.StatusBadGateway && code != http.StatusServiceUnavailable && code != http.StatusGatewayTimeout {
			t.Fatalf("%s %q: status %d", method, path, code)
		}
		if !mayPass {
			if n := g.fake.Stats().Requests - before; n != 0 {
				t.Fatalf("%s %q with Authorization %q: %d requests reached the backend", method, path, auth, n)
			}
		}
		g.checkHealthy(t)
	})
}
