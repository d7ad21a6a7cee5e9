// Package fakellm starts fakellm, the stand-in for a GPU model server that
// speaks OpenAI's chat API the way vLLM does, in-process on a loopback
// listener. Tests and benchmarks of other services and the all-in-one demo
// use it; it answers from a script, it is not a model.
package fakellm

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/fakellm"
)

// Config, Faults, Rule, ScriptToolCall and Stats are fakellm's; see the
// internal package for the field docs.
type (
	Config         = fakellm.Config
	Faults         = fakellm.Faults
	Rule           = fakellm.Rule
	ScriptToolCall = fakellm.ScriptToolCall
	Stats          = fakellm.Stats
	Server         = fakellm.Server
)

// DefaultReply begins the answer when no script rule matches.
const DefaultReply = fakellm.DefaultReply

// LoadScript reads a JSONL script file.
func LoadScript(path string) ([]Rule, error) { return fakellm.LoadScript(path) }

// TokenIDs is the fake tokenizer, for tests that check token ids.
func TokenIDs(text string) []int { return fakellm.TokenIDs(text) }

// Instance is a running fakellm.
type Instance struct {
	*Server
	// URL is the base URL, e.g. "http://127.0.0.1:41234".
	URL string
	// Addr is the listening address.
	Addr string

	srv  *http.Server
	done chan struct{} // closed when serving stopped
}

// readTimeout bounds the arrival of a request, body included: a client
// that trickles its body does not hold a connection for ever.
var readTimeout = time.Minute

// Start listens on addr ("127.0.0.1:0" for any free port) and serves until
// Close or until ctx is cancelled.
func Start(ctx context.Context, addr string, cfg Config) (*Instance, error) {
	s, err := fakellm.New(cfg)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return Serve(ctx, ln, s), nil
}

// Serve serves s on ln until Close or until ctx is cancelled.
func Serve(ctx context.Context, ln net.Listener, s *Server) *Instance {
	in := &Instance{
		Server: s,
		URL:    "http://" + ln.Addr().String(),
		Addr:   ln.Addr().String(),
		srv:    &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: readTimeout},
		done:   make(chan struct{}),
	}
	stop := context.AfterFunc(ctx, func() { in.srv.Close() })
	go func() {
		defer close(in.done)
		defer stop()
		_ = in.srv.Serve(ln) // returns ErrServerClosed after Close
	}()
	return in
}

// New builds a fakellm handler without listening.
func New(cfg Config) (*Server, error) { return fakellm.New(cfg) }

// Close stops the server at once, dropping open connections, the way a
// killed process would. It may be called more than once.
func (in *Instance) Close() error {
	err := in.srv.Close()
	<-in.done
	return err
}
