package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
)

// ChildFlag is the flag with which benchgateway re-runs itself as one of
// the processes under test: each server gets its own process (its own
// scheduler and garbage collector), as nginx has and as deployments have.
const ChildFlag = "bench-child"

// Child runs the server named by what ("fakellm", or "gateway",
// "gateway-goroutines" (its HTTP front on engine goroutines),
// "bareproxy", "baregrpc", "eventproxy" or "eventgrpc" with the backend
// URL as arg), prints "ADDR <addr>..." on out and serves until its
// standard input closes, which happens when the parent exits.
func Child(ctx context.Context, what, arg string, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, in)
		cancel()
	}()
	switch what {
	case "fakellm":
		f, err := fakellm.Start(ctx, "127.0.0.1:0", fakellm.Config{Script: []fakellm.Rule{{Match: "", Reply: "ls -la ~"}}})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "ADDR %s\n", f.URL)
		<-ctx.Done()
		return f.Close()
	case "bareproxy":
		return serveBareProxy(ctx, arg, out)
	case "baregrpc":
		return serveBareGRPCProxy(ctx, arg, out)
	case "eventproxy":
		return serveEventProxy(ctx, arg, out)
	case "eventgrpc":
		return serveEventGRPCProxy(ctx, arg, out)
	case "gateway-affinity":
		// arg is "POLICY URL,URL,...": part (b)'s gateway, in a process
		// of its own as users run it, so that its event loops do not
		// share a Go scheduler with the sessions and the backends.
		policy, urls, _ := strings.Cut(arg, " ")
		fc := &modelgateway.FileConfig{Routing: modelgateway.RoutingConfig{Policy: policy}}
		for i, u := range strings.Split(urls, ",") {
			fc.Backends = append(fc.Backends, modelgateway.BackendConfig{ID: fmt.Sprint("fake", i), BaseURL: u, Model: "fake-model"})
		}
		fc.HTTPFront.Engine = os.Getenv("BENCHGATEWAY_AFFINITY_ENGINE")
		return serveGateway(ctx, fc, out)
	case "gateway", "gateway-goroutines", "gateway-grpc-goroutines":
		// As the gateway binary runs.
		modelgateway.SetGCDefaults()
		if path := os.Getenv("BENCHGATEWAY_GATEWAY_CPUPROFILE"); path != "" {
			// Profiling the gateway process alone, apart from the load
			// generator and fakellm.
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		if n, err := strconv.Atoi(os.Getenv("BENCHGATEWAY_GATEWAY_GOMAXPROCS")); err == nil && n > 0 {
			// The gateway alone, apart from the generator and fakellm
			// (GOMAXPROCS in the environment would set all three).
			runtime.GOMAXPROCS(n)
		}
		if path := os.Getenv("BENCHGATEWAY_GATEWAY_TRACE"); path != "" {
			// An execution trace shows where requests wait for a CPU
			// (go tool trace -pprof=sched).
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := trace.Start(f); err != nil {
				return err
			}
			defer trace.Stop()
		}
		fc := &modelgateway.FileConfig{
			Backends: []modelgateway.BackendConfig{{ID: "fake", BaseURL: arg, Model: "fake-model"}},
		}
		switch what {
		case "gateway-goroutines":
			// The HTTP front on its other engine, for comparison.
			fc.HTTPFront.Engine = modelgateway.EngineGoroutines
		case "gateway-grpc-goroutines":
			// The gRPC front on its other engine, grpc-go's server.
			fc.GRPCFront.Engine = modelgateway.EngineGoroutines
		}
		return serveGateway(ctx, fc, out)
	}
	return fmt.Errorf("unknown child %q", what)
}

// serveGateway serves a gateway of fc until ctx ends, printing "ADDR
// <http url> <grpc addr>" on out once it listens.
func serveGateway(ctx context.Context, fc *modelgateway.FileConfig, out io.Writer) error {
	svc, stop, grpcAddr, err := newGateway(ctx, fc)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ADDR http://%s %s\n", svc.OpenAIAddr(), grpcAddr)
	<-ctx.Done()
	stop()
	return nil
}

// child is a server process started by startChild.
type child struct {
	addrs []string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
}

// startChild re-runs this binary as a server and reads its addresses;
// place puts the command on its CPUs.
func startChild(ctx context.Context, place func(string, ...string) (string, []string), what, arg string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	name, args := place(self, "-"+ChildFlag, what, arg)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	c := &child{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
		c.done <- cmd.Wait()
	}()
	select {
	case line, ok := <-lines:
		f := strings.Fields(line)
		if !ok || len(f) < 2 || f[0] != "ADDR" {
			c.stop()
			return nil, fmt.Errorf("%s child said %q", what, line)
		}
		c.addrs = f[1:]
		return c, nil
	case <-time.After(childStartTimeout):
		c.stop()
		return nil, errors.New(what + " child did not start")
	}
}

// childStartTimeout bounds a child's start; under valgrind a Go server
// takes seconds to start on a busy machine.
var childStartTimeout = 10 * time.Second

// childStopTimeout bounds a child's exit after its standard input closed
// (valgrind writes its profile then).
var childStopTimeout = 5 * time.Second

func (c *child) stop() {
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(childStopTimeout):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// hostPort strips the scheme of a base URL.
func hostPort(url string) string {
	h := strings.TrimPrefix(url, "http://")
	if _, _, err := net.SplitHostPort(h); err != nil {
		return url
	}
	return h
}
