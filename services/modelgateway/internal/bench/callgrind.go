package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/benchreport"
)

// Instructions per request under valgrind's callgrind: unlike CPU time
// they do not move with other work on a shared machine. Each target runs
// twice under callgrind, once serving warm requests plus n, once serving
// the warm requests and then idling as long as the n took, and the
// difference of the two totals over n is its cost per request (start-up,
// shutdown and timers cancel out). Requests go one after the other, so
// each one wakes the process as at a low rate.

// instrTarget is one path measured under callgrind.
type instrTarget struct {
	name string
	// start runs the server under callgrind (wrap puts valgrind in front
	// of a command) and returns a function that sends one request, and
	// one that stops the server and waits until its profiles are written.
	start func(ctx context.Context, wrap func(string, ...string) (string, []string)) (send func(context.Context) error, stop func(), err error)
}

// callgrindGODEBUG is what the Go servers run with under callgrind. Go's
// asynchronous preemption signals trip an assertion of callgrind 3.19.
// And where the CPU has RDTSCP, valgrind 3.19 reports it through CPUID but
// cannot run it: Go's runtime reads the cycle counter with it (contended
// locks, a panic's report), and the gateway died of SIGILL on session 18's
// machine (an AMD "Turin-like" virtual CPU). Without it the runtime uses
// LFENCE and RDTSC, which valgrind runs. (golang.org/x/sys/cpu, which
// also reads GODEBUG, does not know the name and says so on stderr.)
const callgrindGODEBUG = "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off"

// callgrindWrap runs a command under callgrind writing out+".<pid>" files.
func callgrindWrap(valgrind, out string) func(string, ...string) (string, []string) {
	return func(bin string, args ...string) (string, []string) {
		return "env", append([]string{callgrindGODEBUG, valgrind, "-q", "--tool=callgrind", "--callgrind-out-file=" + out + ".%p", bin}, args...)
	}
}

// callgrindTotal sums the instruction totals of the files out.*.
func callgrindTotal(out string) (int64, error) {
	files, err := filepath.Glob(out + ".*")
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no callgrind output %s.*", out)
	}
	var sum int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		found := false
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "totals: "); ok {
				n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%s: totals: %w", f, err)
				}
				sum += n
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("%s: no totals line", f)
		}
	}
	return sum, nil
}

// instrPerRequest runs t twice under callgrind: warm requests then n
// more, and warm requests then as long idle as the n took (the Go
// runtime's and the gateway's timers run whether requests come or not).
// It returns instructions per request and how long the n took.
func instrPerRequest(ctx context.Context, valgrind string, t instrTarget, warm, n int) (perReq float64, took time.Duration, err error) {
	var totals [2]int64
	for k := range 2 {
		dir, err := os.MkdirTemp("", "benchgateway-callgrind-")
		if err != nil {
			return 0, 0, err
		}
		// nginx's worker runs as nobody and writes its own profile.
		if err := os.Chmod(dir, 0o777); err != nil {
			os.RemoveAll(dir)
			return 0, 0, err
		}
		out := filepath.Join(dir, "callgrind.out")
		send, stop, err := t.start(ctx, callgrindWrap(valgrind, out))
		if err != nil {
			os.RemoveAll(dir)
			return 0, 0, fmt.Errorf("%s: %w", t.name, err)
		}
		count := warm
		if k == 0 {
			count += n
		}
		var start time.Time
		for i := 0; i < count; i++ {
			if i == warm {
				start = time.Now()
			}
			if err := send(ctx); err != nil {
				stop()
				os.RemoveAll(dir)
				return 0, 0, fmt.Errorf("%s: request %d: %w", t.name, i, err)
			}
		}
		if k == 0 {
			took = time.Since(start)
		} else {
			select {
			case <-ctx.Done():
			case <-time.After(took):
			}
		}
		stop()
		totals[k], err = callgrindTotal(out)
		if keep := os.Getenv("BENCHGATEWAY_CALLGRIND_KEEP"); keep != "" && k == 0 {
			// The profiles of the run with requests, for callgrind_annotate.
			files, _ := filepath.Glob(out + ".*")
			for _, f := range files {
				os.Rename(f, filepath.Join(keep, strings.NewReplacer(" ", "_", ">", "", "-", "").Replace(t.name)+"."+filepath.Base(f)))
			}
		}
		os.RemoveAll(dir)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", t.name, err)
		}
	}
	return float64(totals[0]-totals[1]) / float64(n), took, nil
}

// instrRounds is how many times each proxy's instructions per request are
// measured; the median counts.
const instrRounds = 3

// median is the middle of vs (the mean of the two middle ones for an even
// count); vs is sorted in a copy.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runInstructions measures instructions per request of nginx, of the
// gateway's two fronts and of the bare Go and grpc-go proxies (the
// fronts' floors), each in front of a fakellm that runs natively.
func runInstructions(ctx context.Context, o Options, w io.Writer) error {
	valgrind, err := exec.LookPath("valgrind")
	if err != nil {
		fmt.Fprintf(w, "(c) instructions per request: skipped, valgrind not found (Debian package valgrind)\n\n")
		return nil
	}
	childStartTimeout, childStopTimeout = 3*time.Minute, 2*time.Minute
	nginxStartTimeout, nginxStopTimeout = 3*time.Minute, 2*time.Minute
	defer func() {
		childStartTimeout, childStopTimeout = 10*time.Second, 5*time.Second
		nginxStartTimeout, nginxStopTimeout = 5*time.Second, 3*time.Second
	}()
	native := func(bin string, args ...string) (string, []string) { return bin, args }
	fake, err := startChild(ctx, native, "fakellm", "")
	if err != nil {
		return err
	}
	defer fake.stop()
	fakeURL := fake.addrs[0]
	body := chatBody(nil)
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}}
	httpSend := func(url string) func(context.Context) error {
		return func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
	}
	gateway := func(child string, grpcFront bool) func(context.Context, func(string, ...string) (string, []string)) (func(context.Context) error, func(), error) {
		return func(ctx context.Context, wrap func(string, ...string) (string, []string)) (func(context.Context) error, func(), error) {
			gw, err := startChild(ctx, wrap, child, fakeURL)
			if err != nil {
				return nil, nil, err
			}
			if !grpcFront {
				return httpSend(gw.addrs[0]), func() { hc.CloseIdleConnections(); gw.stop() }, nil
			}
			conn, err := runnerConn(gw.addrs[1])
			if err != nil {
				gw.stop()
				return nil, nil, err
			}
			gc, req := rmv1.NewModelGatewayClient(conn), chatRequest(nil)
			send := func(ctx context.Context) error { _, err := gc.Chat(ctx, req); return err }
			return send, func() { conn.Close(); gw.stop() }, nil
		}
	}
	targets := []instrTarget{
		{name: "nginx -> fakellm", start: func(ctx context.Context, wrap func(string, ...string) (string, []string)) (func(context.Context) error, func(), error) {
			ng, err := startNginx(ctx, wrap, o.Nginx, hostPort(fakeURL), 1)
			if err != nil {
				return nil, nil, err
			}
			return httpSend("http://" + ng.addr), func() { hc.CloseIdleConnections(); ng.stop() }, nil
		}},
		{name: "gateway HTTP -> fakellm", start: gateway("gateway", false)},
		{name: "gateway gRPC Chat -> fakellm", start: gateway("gateway", true)},
		{name: "bare Go proxy (fasthttp) -> fakellm", start: func(ctx context.Context, wrap func(string, ...string) (string, []string)) (func(context.Context) error, func(), error) {
			bare, err := startChild(ctx, wrap, "bareproxy", fakeURL)
			if err != nil {
				return nil, nil, err
			}
			return httpSend(bare.addrs[0]), func() { hc.CloseIdleConnections(); bare.stop() }, nil
		}},
		{name: "bare grpc-go proxy -> fakellm", start: func(ctx context.Context, wrap func(string, ...string) (string, []string)) (func(context.Context) error, func(), error) {
			bare, err := startChild(ctx, wrap, "baregrpc", fakeURL)
			if err != nil {
				return nil, nil, err
			}
			conn, err := runnerConn(bare.addrs[0])
			if err != nil {
				bare.stop()
				return nil, nil, err
			}
			return bareGRPCDoer(conn, body), func() { conn.Close(); bare.stop() }, nil
		}},
		{name: "event-loop proxy (gnet) -> fakellm", start: func(ctx context.Context, wrap func(string, ...string) (string, []string)) (func(context.Context) error, func(), error) {
			event, err := startChild(ctx, wrap, "eventproxy", fakeURL)
			if err != nil {
				return nil, nil, err
			}
			return httpSend(event.addrs[0]), func() { hc.CloseIdleConnections(); event.stop() }, nil
		}},
		{name: "gateway HTTP, engine goroutines -> fakellm", start: gateway("gateway-goroutines", false)},
		{name: "event-loop gRPC proxy (gnet, HTTP/2) -> fakellm", start: func(ctx context.Context, wrap func(string, ...string) (string, []string)) (func(context.Context) error, func(), error) {
			event, err := startChild(ctx, wrap, "eventgrpc", fakeURL)
			if err != nil {
				return nil, nil, err
			}
			conn, err := runnerConn(event.addrs[0])
			if err != nil {
				event.stop()
				return nil, nil, err
			}
			return bareGRPCDoer(conn, body), func() { conn.Close(); event.stop() }, nil
		}},
		{name: "gateway gRPC Chat, engine goroutines -> fakellm", start: gateway("gateway-grpc-goroutines", true)},
	}
	warm, n := 200, o.InstrRequests
	fmt.Fprintf(w, "(c) instructions per request under valgrind --tool=callgrind (all threads and processes of\n")
	fmt.Fprintf(w, "    the proxy; fakellm runs natively): each proxy runs twice, serving %d warm requests and\n", warm)
	fmt.Fprintf(w, "    %d more one at a time on one connection, or the warm ones and then idling as long as the\n", n)
	fmt.Fprintf(w, "    %d took; the difference of the two totals over %d.\n", n, n)
	fmt.Fprintf(w, "    nginx runs one worker; the Go servers run with %s (callgrind needs it).\n", callgrindGODEBUG)
	fmt.Fprintf(w, "    Each proxy is measured %d times and its median counts: now and then a Go server's\n", instrRounds)
	fmt.Fprintf(w, "    background sweeper yields hundreds of thousands of times in one of the two runs\n")
	fmt.Fprintf(w, "    (callgrind runs one thread at a time), which moved one difference by -18x to +41x nginx's.\n")
	per := make([]float64, len(targets))
	rounds := make([][]float64, len(targets))
	took := make([]time.Duration, len(targets))
	for i, t := range targets {
		for range instrRounds {
			got, d, err := instrPerRequest(ctx, valgrind, t, warm, n)
			if err != nil {
				return err
			}
			rounds[i] = append(rounds[i], got)
			took[i] = max(took[i], d)
		}
		per[i] = median(rounds[i])
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tinstructions/req (median)\tratio to nginx\teach run\twall time of the requests (valgrind, longest)\t")
	for i, t := range targets {
		each := make([]string, len(rounds[i]))
		for k, v := range rounds[i] {
			each[k] = fmt.Sprintf("%.0f", v)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2fx\t%s\t%s\t\n", t.name, per[i], per[i]/per[0], strings.Join(each, " / "), took[i].Round(time.Millisecond))
	}
	tw.Flush()
	if per[0] <= 0 {
		return errors.New("nginx measured no instructions per request")
	}
	fmt.Fprintf(w, "    goal <= 1.5x nginx's instructions/req: HTTP front %s (%.2fx), gRPC front %s (%.2fx)\n",
		verdict(per[1] <= 1.5*per[0]), per[1]/per[0], verdict(per[2] <= 1.5*per[0]), per[2]/per[0])
	fmt.Fprintf(w, "    HTTP floor: the event-loop proxy (the front's engine, no gateway code) runs %.2fx nginx's instructions; the gateway's own code adds %.0f per request\n",
		per[5]/per[0], per[1]-per[5])
	fmt.Fprintf(w, "    engine goroutines: the HTTP front on fasthttp runs %.2fx nginx's instructions, on a floor (bare fasthttp proxy) of %.2fx\n",
		per[6]/per[0], per[3]/per[0])
	fmt.Fprintf(w, "    gRPC floor: the event-loop gRPC proxy (HTTP/2 on the front's engine, no gateway code) runs %.2fx nginx's instructions; the gateway's own code adds %.0f per request\n",
		per[7]/per[0], per[2]-per[7])
	fmt.Fprintf(w, "    engine goroutines: the gRPC front on grpc-go's server runs %.2fx nginx's instructions (%.0f), on a floor (bare grpc-go proxy) of %.2fx\n",
		per[8]/per[0], per[8], per[4]/per[0])
	fmt.Fprintln(w)
	benchreport.Goal(w, "gateway-instructions", "gateway instructions per request ≤ 1.5× nginx's, both fronts (callgrind)",
		fmt.Sprintf("HTTP %.2f×, gRPC %.2f× (nginx %.0f)", per[1]/per[0], per[2]/per[0], per[0]), benchreport.Judge(per[1] <= 1.5*per[0] && per[2] <= 1.5*per[0]))
	return nil
}
