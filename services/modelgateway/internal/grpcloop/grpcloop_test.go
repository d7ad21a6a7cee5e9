package grpcloop

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
)

// echo is grpc-go's interop TestService: its unary calls run on the
// loops, its streams on the fallback (grpc-go's server).
type echo struct {
	testpb.UnimplementedTestServiceServer
	// ended counts the calls whose context ended before they did;
	// release lets "hold" calls go.
	ended   atomic.Int64
	release chan struct{}
	started chan struct{}
}

func (e *echo) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	body := req.GetPayload().GetBody()
	switch string(body) {
	case "wait":
		e.started <- struct{}{}
		<-ctx.Done()
		e.ended.Add(1)
		return nil, ctx.Err()
	case "hold":
		e.started <- struct{}{}
		<-e.release
	case "fail":
		st, _ := status.New(codes.FailedPrecondition, "100% refused\n").WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "payload", Description: "no"}}})
		grpc.SetTrailer(ctx, metadata.Pairs("why", "asked"))
		return nil, st.Err()
	case "meta":
		md, _ := metadata.FromIncomingContext(ctx)
		grpc.SetHeader(ctx, metadata.Pairs("h-bin", "\x00\x01\xff", "method", grpc.ServerTransportStreamFromContext(ctx).Method()))
		grpc.SetTrailer(ctx, metadata.Pairs("t", "v"))
		_, hasDeadline := ctx.Deadline()
		body = []byte(strings.Join(md.Get("x-test"), ",") + "|" + string(md.Get("x-raw-bin")[0]) + "|" + boolText(hasDeadline))
	}
	if n := req.GetResponseSize(); n > 0 {
		body = bytes.Repeat([]byte{'a'}, int(n))
	}
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: body}}, nil
}

func boolText(b bool) string {
	if b {
		return "deadline"
	}
	return "none"
}

func (e *echo) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}

// startServer serves echo on the loops, with grpcserver's server (token
// required) behind them.
func startServer(t *testing.T) (*Server, *echo, string) {
	t.Helper()
	return startServerWith(t, func(*Options) {})
}

// startServerWith is startServer with tweak applied to the options.
func startServerWith(t *testing.T, tweak func(*Options)) (*Server, *echo, string) {
	t.Helper()
	gs, err := grpcserver.New(grpcserver.Options{Logger: zaptest.NewLogger(t), Registry: prometheus.NewRegistry(), AuthToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{release: make(chan struct{}), started: make(chan struct{}, 4)}
	testpb.RegisterTestServiceServer(gs.GRPC, e)
	gs.Ready()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Listener: ln, Fallback: gs.GRPC, Interceptor: gs.Unary, Codec: gs.Codec,
		MaxMsgBytes: 8 << 20, MinPingInterval: 5 * time.Second, Logger: zaptest.NewLogger(t)}
	tweak(&opts)
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	testpb.RegisterTestServiceServer(s, e)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s, e, ln.Addr().String()
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func authed(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok")
}

func TestCallsBothWays(t *testing.T) {
	_, _, addr := startServer(t)
	conn := dial(t, addr)
	cli := testpb.NewTestServiceClient(conn)

	// Three times a stream's window each way, on the loops.
	big := bytes.Repeat([]byte{'x'}, 3<<20)
	resp, err := cli.UnaryCall(authed(t, 10*time.Second), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: big}, ResponseSize: 3 << 20})
	if err != nil || len(resp.GetPayload().GetBody()) != 3<<20 {
		t.Fatalf("3 MiB unary call: %d bytes, err %v; want 3 MiB back", len(resp.GetPayload().GetBody()), err)
	}
	// Within the windows but over a frame: written in frames straight
	// from the codec's buffer.
	resp, err = cli.UnaryCall(authed(t, 10*time.Second), &testpb.SimpleRequest{ResponseSize: 40000})
	if err != nil || !bytes.Equal(resp.GetPayload().GetBody(), bytes.Repeat([]byte{'a'}, 40000)) {
		t.Fatalf("40 kB answer: %d bytes, err %v", len(resp.GetPayload().GetBody()), err)
	}
	// And on the fallback: a stream through grpc-go's server.
	stream, err := cli.FullDuplexCall(authed(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: big}}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		got, err := stream.Recv()
		if err != nil || !bytes.Equal(got.GetPayload().GetBody(), big) {
			t.Fatalf("stream message %d: %d bytes, err %v", i, len(got.GetPayload().GetBody()), err)
		}
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("stream end: %v, want EOF", err)
	}

	// 64 calls at once on the one connection.
	errs := make(chan error, 64)
	for i := range 64 {
		go func() {
			body := []byte(strings.Repeat("c", i+1))
			r, err := cli.UnaryCall(authed(t, 10*time.Second), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: body}})
			if err == nil && !bytes.Equal(r.GetPayload().GetBody(), body) {
				err = errors.New("answer of another call")
			}
			errs <- err
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestStatusesAndMetadata(t *testing.T) {
	_, _, addr := startServer(t)
	conn := dial(t, addr)
	cli := testpb.NewTestServiceClient(conn)

	// The interceptors run: no token, no call (the loops' path).
	if _, err := cli.UnaryCall(context.Background(), &testpb.SimpleRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("call without a token: %v, want Unauthenticated", err)
	}
	// Health takes none, through the fallback.
	hr, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v, err %v; want SERVING", hr, err)
	}
	if err := conn.Invoke(authed(t, 5*time.Second), "/no.Such/Method", &testpb.Empty{}, &testpb.Empty{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown method: %v, want Unimplemented", err)
	}

	// Metadata in and out, binary values included, and the deadline.
	var header, trailer metadata.MD
	ctx := metadata.AppendToOutgoingContext(authed(t, 5*time.Second), "x-test", "a", "x-test", "b", "x-raw-bin", "\x00\xfe")
	resp, err := cli.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("meta")}}, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(resp.GetPayload().GetBody()), "a,b|\x00\xfe|deadline"; got != want {
		t.Errorf("the handler saw %q, want %q", got, want)
	}
	if got := header.Get("h-bin"); len(got) != 1 || got[0] != "\x00\x01\xff" {
		t.Errorf("header h-bin = %q", got)
	}
	if got := header.Get("method"); len(got) != 1 || got[0] != "/grpc.testing.TestService/UnaryCall" {
		t.Errorf("header method = %q", got)
	}
	if got := trailer.Get("t"); len(got) != 1 || got[0] != "v" {
		t.Errorf("trailer t = %q", got)
	}

	// A failure with details, a message to percent-encode, and trailers.
	trailer = nil
	_, err = cli.UnaryCall(authed(t, 5*time.Second), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("fail")}}, grpc.Trailer(&trailer))
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || st.Message() != "100% refused\n" || len(st.Details()) != 1 || trailer.Get("why")[0] != "asked" {
		t.Errorf("failure: %v details %v trailer %v; want FailedPrecondition, its message, one detail, trailer why", st, st.Details(), trailer)
	}

	// A message over the limit, as grpc-go refuses it.
	_, err = cli.UnaryCall(authed(t, 5*time.Second), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: make([]byte, 9<<20)}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("9 MiB message: %v, want ResourceExhausted", err)
	}
	// So is an answer over it.
	_, err = cli.UnaryCall(authed(t, 5*time.Second), &testpb.SimpleRequest{ResponseSize: 9 << 20})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("9 MiB answer: %v, want ResourceExhausted", err)
	}
	// The connection still serves.
	if _, err := cli.UnaryCall(authed(t, 5*time.Second), &testpb.SimpleRequest{}); err != nil {
		t.Errorf("after the refusals: %v", err)
	}
}

func TestDeadlineAndCancel(t *testing.T) {
	_, e, addr := startServer(t)
	cli := testpb.NewTestServiceClient(dial(t, addr))
	wait := &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("wait")}}

	start := time.Now()
	_, err := cli.UnaryCall(authed(t, 200*time.Millisecond), wait)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("call past its deadline: %v, want DeadlineExceeded", err)
	}
	waitUntil(t, "the handler's context to end at the deadline", func() bool { return e.ended.Load() == 1 })
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("deadline of 200ms ended the handler after %v", d)
	}

	ctx, cancel := context.WithCancel(authed(t, time.Minute))
	done := make(chan error, 1)
	go func() {
		_, err := cli.UnaryCall(ctx, wait)
		done <- err
	}()
	<-e.started
	<-e.started // the first call's
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("cancelled call: %v, want Canceled", err)
	}
	waitUntil(t, "the handler's context to end at the client's cancel", func() bool { return e.ended.Load() == 2 })
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDrainFinishesCallsInFlight(t *testing.T) {
	s, e, addr := startServer(t)
	cli := testpb.NewTestServiceClient(dial(t, addr))
	done := make(chan error, 1)
	go func() {
		_, err := cli.UnaryCall(authed(t, 10*time.Second), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("hold")}})
		done <- err
	}()
	<-e.started
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		drained <- s.Drain(ctx)
	}()
	// A new connection is refused once the drain began.
	waitUntil(t, "the drain to close the listener", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case err := <-drained:
		t.Fatalf("drain returned (%v) with a call in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(e.release)
	if err := <-done; err != nil {
		t.Errorf("call in flight during the drain: %v, want it answered", err)
	}
	if err := <-drained; err != nil {
		t.Errorf("drain: %v", err)
	}
}

// rawConn is an HTTP/2 client connection at the frame level.
func rawConn(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	return c, fr
}

func TestTooManyPingsGetGoAway(t *testing.T) {
	_, _, addr := startServer(t)
	_, fr := rawConn(t, addr)
	for i := range 5 {
		fr.WritePing(false, [8]byte{byte(i)})
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("connection ended without GOAWAY: %v", err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != http2.ErrCodeEnhanceYourCalm || string(ga.DebugData()) != "too_many_pings" {
				t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", ga.ErrCode, ga.DebugData())
			}
			return
		}
	}
}

// TestHeaderFloodGetsGoAway sends a header block that never ends, in
// CONTINUATION frames of valid fields, and wants the connection ended.
func TestHeaderFloodGetsGoAway(t *testing.T) {
	_, _, addr := startServer(t)
	_, fr := rawConn(t, addr)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	enc.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
	enc.WriteField(hpack.HeaderField{Name: ":path", Value: "/grpc.testing.TestService/UnaryCall"})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes()})
	// 500 kB of fields: past four times the 64 kB bound.
	for range 50 {
		block.Reset()
		for range 10 {
			enc.WriteField(hpack.HeaderField{Name: "x-flood", Value: strings.Repeat("f", 1000)})
		}
		if err := fr.WriteContinuation(1, false, block.Bytes()); err != nil {
			break // the server closed the connection
		}
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("connection ended without GOAWAY: %v", err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM", ga.ErrCode, ga.DebugData())
			}
			return
		}
	}
}

// TestKeepalive wants a silent client pinged, a client that answers kept,
// and one that does not closed, as grpc-go's server keepalive does.
func TestKeepalive(t *testing.T) {
	_, _, addr := startServerWith(t, func(o *Options) {
		o.KeepaliveTime, o.KeepaliveTimeout = 300*time.Millisecond, 300*time.Millisecond
	})
	nextPing := func(fr *http2.Framer) (*http2.PingFrame, error) {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return nil, err
			}
			if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
				return p, nil
			}
		}
	}
	// Answered twice: the connection stays.
	_, fr := rawConn(t, addr)
	for i := range 2 {
		p, err := nextPing(fr)
		if err != nil {
			t.Fatalf("ping %d to an idle client: %v", i, err)
		}
		fr.WritePing(true, p.Data)
	}
	fr.WritePing(false, [8]byte{'s', 't', 'i', 'l', 'l'})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("a client that answered the pings was dropped: %v", err)
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			break
		}
	}
	// Not answered: closed.
	c, fr := rawConn(t, addr)
	if _, err := nextPing(fr); err != nil {
		t.Fatalf("ping to an idle client: %v", err)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Errorf("a client that did not answer the ping: %v, want its connection closed", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("closed %v after the ping, want about the 300ms timeout", d)
	}
}

func TestNotHTTP2IsClosed(t *testing.T) {
	_, _, addr := startServer(t)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// The server's SETTINGS come at once, as HTTP/2 servers send them;
	// then the close.
	got, err := io.ReadAll(c)
	if err != nil || bytes.Contains(got, []byte("HTTP/1")) {
		t.Errorf("an HTTP/1.1 request: read %q, err %v; want the connection closed with no answer", got, err)
	}
}

func TestParseTimeout(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1S", time.Second, true},
		{"250m", 250 * time.Millisecond, true},
		{"99999999H", 1<<63 - 1, true},
		{"5u", 5 * time.Microsecond, true},
		{"7n", 7, true},
		{"2M", 2 * time.Minute, true},
		{"S", 0, false},
		{"123456789S", 0, false},
		{"1x", 0, false},
		{"-1S", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseTimeout(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseTimeout(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestEncodeMessage(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain words", "plain words"},
		{"100%", "100%25"},
		{"line\nbreak", "line%0Abreak"},
		{"héllo", "h%C3%A9llo"},
	}
	for _, tt := range tests {
		if got := encodeMessage(tt.in); got != tt.want {
			t.Errorf("encodeMessage(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestOnLoopCallEnds: a call served on the loop that is never answered
// is ended by the loop at the deadline its handler set (OnEnd hears
// DeadlineExceeded, the client gets it) and, when its client cancels,
// OnEnd hears Canceled.
func TestOnLoopCallEnds(t *testing.T) {
	gs, err := grpcserver.New(grpcserver.Options{Logger: zaptest.NewLogger(t), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Addr: "127.0.0.1:0", Fallback: gs.GRPC, Codec: gs.Codec, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ends := make(chan error, 2)
	s.HandleOnLoop("/grpc.testing.TestService/UnaryCall", func(c *LoopCall) {
		if _, ok := c.Deadline(); !ok {
			c.SetDeadline(time.Now().Add(200 * time.Millisecond))
		}
		c.OnEnd(func(err error) { ends <- err })
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	cli := testpb.NewTestServiceClient(dial(t, s.Addr().String()))

	// No deadline of the client's: a cancel after 10s only keeps a
	// broken server from holding the test.
	ctx, cancel := context.WithCancel(context.Background())
	defer time.AfterFunc(10*time.Second, cancel).Stop()
	start := time.Now()
	if _, err := cli.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("call past the deadline its handler set: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a deadline of 200ms ended the call after %v", d)
	}
	if err := <-ends; err != context.DeadlineExceeded {
		t.Errorf("OnEnd heard %v at the deadline, want DeadlineExceeded", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := cli.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled call: %v, want Canceled", err)
	}
	select {
	case err := <-ends:
		if err != context.Canceled {
			t.Errorf("OnEnd heard %v at the cancel, want Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("OnEnd not called at the client's cancel")
	}
	waitUntil(t, "no call left on the loops", func() bool { return s.onLoopCalls.Load() == 0 })
}

// TestStoppedByClose: loops stopped by Close report no error of their
// own (a daemon watching Stopped does not take it for a failure).
func TestStoppedByClose(t *testing.T) {
	s, _, _ := startServer(t)
	if err := s.Err(); err != nil {
		t.Errorf("Err() while serving = %v, want nil", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("Stopped not closed 10s after Close")
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err() after Close = %v, want nil", err)
	}
}
