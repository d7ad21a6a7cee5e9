// Package bench measures the gateway: (a) the latency it adds in front of a
// zero-latency fakellm, side by side with fakellm reached directly and
// through nginx as a plain reverse proxy, all driven by the same load
// generator in one run; (b) time to first token and prefix-cache hit rate
// of sticky_least_loaded against round_robin over several fakellm backends.
package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// sample is the outcome of one load run.
type sample struct {
	lats []time.Duration
	// late is how long after its scheduled time each request of an
	// open-loop run was sent, sorted.
	late     []time.Duration
	errors   int64
	firstErr string
	// shed counts requests not sent because too many were outstanding:
	// the target could not keep up with the rate.
	shed    int64
	elapsed time.Duration
	// cpu is the CPU time the target's first process spent on the run,
	// cpuAll that of every process of the measurement.
	cpu, cpuAll time.Duration
	// sleeps counts the times a thread of the target's processes blocked
	// (voluntary context switches): each is a wake-up later.
	sleeps int64
	// roundP99 is the p99 of each run merged in, in run order.
	roundP99 []time.Duration
}

// cpuPerRequest divides the CPU time by the requests answered or failed.
func (s sample) cpuPerRequest() time.Duration {
	n := int64(len(s.lats)) + s.errors
	if n == 0 {
		return 0
	}
	return s.cpu / time.Duration(n)
}

// sleepsPerRequest divides the target's sleeps by the requests answered or
// failed.
func (s sample) sleepsPerRequest() float64 {
	n := int64(len(s.lats)) + s.errors
	if n == 0 {
		return 0
	}
	return float64(s.sleeps) / float64(n)
}

// allCPUPerRequest is cpuPerRequest for every process of the measurement.
func (s sample) allCPUPerRequest() time.Duration {
	n := int64(len(s.lats)) + s.errors
	if n == 0 {
		return 0
	}
	return s.cpuAll / time.Duration(n)
}

// busy is the share of the machine's CPUs the measurement's processes
// used over the run.
func (s sample) busy() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.cpuAll) / float64(s.elapsed) / float64(runtime.NumCPU())
}

// medianRound is the median over rounds of f(round): a burst of other
// work on a shared VM (steal time, a neighbour's compile) spoils a round
// or two, which the median leaves out where a pooled p99 takes it in.
func medianRound(rounds int, f func(r int) time.Duration) time.Duration {
	if rounds == 0 {
		return 0
	}
	v := make([]time.Duration, rounds)
	for r := range v {
		v[r] = f(r)
	}
	slices.Sort(v)
	if rounds%2 == 1 {
		return v[rounds/2]
	}
	return (v[rounds/2-1] + v[rounds/2]) / 2
}

func (s sample) pct(p float64) time.Duration { return pct(s.lats, p) }

// pct is the p-quantile of sorted durations.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

func (s sample) rate() float64 { return float64(len(s.lats)) / s.elapsed.Seconds() }

// merge combines two runs of the same target.
func (s sample) merge(o sample) sample {
	lats := append(slices.Clone(s.lats), o.lats...)
	slices.Sort(lats)
	fe := s.firstErr
	if fe == "" {
		fe = o.firstErr
	}
	late := append(slices.Clone(s.late), o.late...)
	slices.Sort(late)
	return sample{lats: lats, late: late, errors: s.errors + o.errors, firstErr: fe, shed: s.shed + o.shed, elapsed: s.elapsed + o.elapsed, cpu: s.cpu + o.cpu, cpuAll: s.cpuAll + o.cpuAll,
		sleeps: s.sleeps + o.sleeps, roundP99: append(slices.Clone(s.roundP99), o.roundP99...)}
}

// doer sends one request and reports an error unless it fully succeeded.
type doer func(ctx context.Context) error

// newHTTPClient returns a load-generator client with at most conns
// connections per target, as wrk-style generators keep a fixed connection
// set: a burst then queues for a connection (and the wait counts in the
// latency) instead of opening new connections through every hop.
func newHTTPClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns * 4,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		DisableCompression:  true,
	}}
}

// fastDoer posts body to url and reads the whole answer, over at most
// conns connections (a burst waits for a free one, as with newHTTPClient).
// The load generator shares the CPUs with what it measures, so it uses
// fasthttp's client, which costs a fraction of net/http's per request; every
// HTTP target is driven by the same client.
func fastDoer(url string, body []byte, conns int) (doer, error) {
	u, err := neturl.Parse(url)
	if err != nil {
		return nil, err
	}
	hc := &fasthttp.HostClient{
		Addr:                     u.Host,
		MaxConns:                 conns,
		MaxConnWaitTimeout:       time.Minute,
		NoDefaultUserAgentHeader: true,
	}
	return func(context.Context) error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		setPostJSON(req, url, body)
		if err := hc.DoTimeout(req, resp, 10*time.Second); err != nil {
			return err
		}
		if resp.StatusCode() != fasthttp.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode())
		}
		return nil
	}, nil
}

// openLoop sends at a fixed rate regardless of answers (so a slow target
// cannot slow the generator down and hide its latency), at most maxOut
// outstanding, for d. Latency is measured from the moment each request is
// handed to the client; how late that was against the schedule is kept
// too, to show that the generator kept the rate evenly.
func openLoop(ctx context.Context, do doer, rate int, d time.Duration, maxOut int) (sample, error) {
	var (
		mu       sync.Mutex
		firstErr atomic.Value
		total    = int(float64(rate) * d.Seconds())
		lats     = make([]time.Duration, 0, total+16)
		late     = make([]time.Duration, 0, total)
		errs     atomic.Int64
		shed     int64
		out      = make(chan struct{}, maxOut)
		wg       sync.WaitGroup
	)
	p, err := newPacer(time.Second / time.Duration(rate))
	if err != nil {
		return sample{}, err
	}
	defer p.close()
	var waitErr error
	for i := 0; i < total && ctx.Err() == nil; {
		n, err := p.wait()
		if err != nil {
			// Requests in flight still use lats: wait for them first.
			waitErr = err
			break
		}
		for ; n > 0 && i < total; n, i = n-1, i+1 {
			select {
			case out <- struct{}{}:
			default:
				shed++
				continue
			}
			late = append(late, time.Since(p.due(i)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-out }()
				t0 := time.Now()
				if err := do(ctx); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					return
				}
				lat := time.Since(t0)
				mu.Lock()
				lats = append(lats, lat)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if waitErr != nil {
		return sample{}, waitErr
	}
	slices.Sort(lats)
	slices.Sort(late)
	fe, _ := firstErr.Load().(string)
	s := sample{lats: lats, late: late, errors: errs.Load(), firstErr: fe, shed: shed, elapsed: time.Since(p.start)}
	s.roundP99 = []time.Duration{s.pct(.99)}
	return s, nil
}

// closedLoop runs workers that send back to back for d: the most the
// target answers per second at that concurrency.
func closedLoop(ctx context.Context, do doer, workers int, d time.Duration) sample {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		n, errs  atomic.Int64
		wg       sync.WaitGroup
		firstErr atomic.Value
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The clock, not ctx.Err(), ends the run: on a loaded machine
			// the context's timer fires late, and clients that check the
			// deadline themselves fail instantly in the meantime.
			end, _ := ctx.Deadline()
			for time.Now().Before(end) {
				if err := do(ctx); err != nil {
					if time.Until(end) > 10*time.Millisecond {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	fe, _ := firstErr.Load().(string)
	return sample{lats: make([]time.Duration, n.Load()), errors: errs.Load(), firstErr: fe, elapsed: time.Since(start)}
}

// setPostJSON makes req a POST of the JSON body to url.
func setPostJSON(req *fasthttp.Request, url string, body []byte) {
	req.SetRequestURI(url)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
}
