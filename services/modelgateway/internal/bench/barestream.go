package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
)

const bareStreamMethod = "/rolloutmesh.bench.BareProxy/ChatStream"

// serveBareStreamProxy: experiment. Each message of a long-lived bidi
// stream is one request: an 8-byte id, then the backend body.
func serveBareStreamProxy(ctx context.Context, backend string, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hc := &fasthttp.HostClient{Addr: hostPort(backend), MaxConns: 1 << 20}
	url := backend + "/v1/chat/completions"
	handler := func(_ any, ss grpc.ServerStream) error {
		var mu sync.Mutex
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			var msg []byte
			if err := ss.RecvMsg(&msg); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if len(msg) < 8 {
				return fmt.Errorf("short message")
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				setPostJSON(req, url, msg[8:])
				answer := make([]byte, 8, 8+512)
				copy(answer, msg[:8])
				if err := hc.Do(req, resp); err == nil && resp.StatusCode() == fasthttp.StatusOK {
					answer = append(answer, resp.Body()...)
				}
				mu.Lock()
				ss.SendMsg(&answer)
				mu.Unlock()
			}()
		}
	}
	srv := grpc.NewServer(append(grpcserver.TransportOptions(grpcserver.DefaultMaxMsgBytes), grpc.ForceServerCodecV2(rawCodec{}))...)
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "rolloutmesh.bench.BareProxy",
		HandlerType: (*any)(nil),
		Streams:     []grpc.StreamDesc{{StreamName: "ChatStream", Handler: handler, ServerStreams: true, ClientStreams: true}},
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

type muxStream struct {
	mu      sync.Mutex
	cs      grpc.ClientStream
	pending sync.Map // uint64 -> chan []byte
}

// bareStreamDoer multiplexes calls over n long-lived streams on conn.
func bareStreamDoer(ctx context.Context, conn *grpc.ClientConn, body []byte, n int) (doer, error) {
	var streams []*muxStream
	for range n {
		cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, bareStreamMethod, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			return nil, err
		}
		m := &muxStream{cs: cs}
		streams = append(streams, m)
		go func() {
			for {
				var msg []byte
				if err := cs.RecvMsg(&msg); err != nil {
					return
				}
				id := binary.LittleEndian.Uint64(msg)
				if ch, ok := m.pending.LoadAndDelete(id); ok {
					ch.(chan []byte) <- msg[8:]
				}
			}
		}()
	}
	var next atomic.Uint64
	return func(ctx context.Context) error {
		id := next.Add(1)
		m := streams[id%uint64(len(streams))]
		ch := make(chan []byte, 1)
		m.pending.Store(id, ch)
		msg := make([]byte, 8, 8+len(body))
		binary.LittleEndian.PutUint64(msg, id)
		msg = append(msg, body...)
		m.mu.Lock()
		err := m.cs.SendMsg(&msg)
		m.mu.Unlock()
		if err != nil {
			m.pending.Delete(id)
			return err
		}
		select {
		case a := <-ch:
			if !bytes.Contains(a, []byte("choices")) {
				return fmt.Errorf("bad answer")
			}
			return nil
		case <-ctx.Done():
			m.pending.Delete(id)
			return ctx.Err()
		}
	}, nil
}
