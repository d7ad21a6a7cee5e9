package bench

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/valyala/fasthttp"
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
