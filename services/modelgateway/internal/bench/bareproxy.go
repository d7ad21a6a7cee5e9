package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"

	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// The bare proxy is the HTTP front's floor, as the health check is the
// gRPC front's: nginx's job (take a request, send it to the one upstream
// on a kept-alive connection, hand back the answer) done in Go with the
// library the gateway's HTTP front and backend client are built on, and
// none of the gateway's code (no token check, body check, routing,
// metrics or cancellation). Its CPU per request against nginx's is what
// Go and fasthttp cost on this machine; the HTTP front's excess over it is
// what the gateway's own code costs.

// serveBareProxy proxies every request to backend (a base URL) until ctx
// ends, printing "ADDR <url>" on out once it listens.
func serveBareProxy(ctx context.Context, backend string, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hc := &fasthttp.HostClient{Addr: hostPort(backend), MaxConns: 1 << 20}
	srv := &fasthttp.Server{
		Handler: func(c *fasthttp.RequestCtx) {
			// The client's Connection header is for this hop only, as
			// nginx's proxy_set_header Connection "" makes it.
			c.Request.Header.Del("Connection")
			if err := hc.Do(&c.Request, &c.Response); err != nil {
				c.Error(err.Error(), fasthttp.StatusBadGateway)
			}
		},
		MaxRequestBodySize: 64 << 20,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintf(out, "ADDR http://%s\n", ln.Addr())
	select {
	case <-ctx.Done():
	case err := <-done:
		return err
	}
	return srv.Shutdown()
}

// The bare gRPC proxy is the gRPC front's floor in the same sense: a
// grpc-go server with the mesh's transport settings
// (grpcserver.TransportOptions) and none of its code (no interceptors, no
// protobuf, no translation to the backend's JSON and back), whose one
// method takes the backend's request body as raw bytes, posts it to the
// upstream with fasthttp as the bare HTTP proxy does, and returns the
// answer's bytes. Against the health check it adds the backend leg, which
// the gateway's Chat cannot do without either.

// bareGRPCMethod is the bare gRPC proxy's one method.
const bareGRPCMethod = "/rolloutmesh.bench.BareProxy/Chat"

// rawCodec carries a message's bytes as they are: a *[]byte on both sides.
type rawCodec struct{}

func (rawCodec) Name() string { return "raw" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	// A copy: grpc-go reuses data's buffers once Unmarshal returns.
	*b = data.Materialize()
	return nil
}

// serveBareGRPCProxy serves bareGRPCMethod in front of backend (a base
// URL) until ctx ends, printing "ADDR <host:port>" on out once it listens.
func serveBareGRPCProxy(ctx context.Context, backend string, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hc := &fasthttp.HostClient{Addr: hostPort(backend), MaxConns: 1 << 20}
	url := backend + "/v1/chat/completions"
	chat := func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var body []byte
		if err := dec(&body); err != nil {
			return nil, err
		}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		setPostJSON(req, url, body)
		if err := hc.Do(req, resp); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		if resp.StatusCode() != fasthttp.StatusOK {
			return nil, status.Errorf(codes.Unknown, "backend status %d", resp.StatusCode())
		}
		answer := bytes.Clone(resp.Body())
		return &answer, nil
	}
	srv := grpc.NewServer(append(grpcserver.TransportOptions(grpcserver.DefaultMaxMsgBytes), grpc.ForceServerCodecV2(rawCodec{}))...)
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "rolloutmesh.bench.BareProxy",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "Chat", Handler: chat}},
	}, nil)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintf(out, "ADDR %s\n", ln.Addr())
	select {
	case <-ctx.Done():
	case err := <-done:
		return err
	}
	srv.Stop()
	return nil
}

// bareGRPCDoer calls the bare gRPC proxy on conn with body as the request.
func bareGRPCDoer(conn *grpc.ClientConn, body []byte) doer {
	return func(ctx context.Context) error {
		var answer []byte
		return conn.Invoke(ctx, bareGRPCMethod, &body, &answer, grpc.ForceCodecV2(rawCodec{}))
	}
}
