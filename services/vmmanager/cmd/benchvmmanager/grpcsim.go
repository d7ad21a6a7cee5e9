package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager"
)

// resetGuests are M+S guests on one HTTP server, one port each, whose
// POST /execute (the static provider's reset_command) takes a drawn,
// time-scaled reset; each guest records its reset as vmmanager sees it,
// from the command's arrival to the readiness probe that follows it.
type resetGuests struct {
	mu      sync.Mutex
	rng     *rand.Rand
	scale   float64
	started map[string]time.Time // host:port → reset start
	drawn   time.Duration        // simulated
	wall    time.Duration        // command arrival → next probe answered
	n       int
	measure bool
}

func (g *resetGuests) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<16))
	switch r.URL.Path {
	case "/execute":
		g.mu.Lock()
		d := time.Duration(lognormal(g.rng, 20, 0.3) * float64(time.Second))
		g.started[r.Host] = time.Now()
		if g.measure {
			g.drawn += d
		}
		g.mu.Unlock()
		time.Sleep(time.Duration(float64(d) / g.scale))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "output": "", "returncode": 0})
	default:
		g.mu.Lock()
		if t, ok := g.started[r.Host]; ok {
			delete(g.started, r.Host)
			if g.measure {
				g.wall += time.Since(t)
				g.n++
			}
		}
		g.mu.Unlock()
		_, _ = w.Write([]byte("Linux"))
	}
}

// simulateGRPC is simulate's utilisation run through the real service over
// loopback gRPC: a static pool of M (+spares) guests whose reset is a
// drawn sleep behind POST /execute, N workers that each AcquireLease
// (waiting), hold the VM for a drawn episode and ReleaseLease with reset.
// Busy is the workers' own hold time (AcquireLease answered → ReleaseLease
// sent) clipped to the window, over window × M.
func simulateGRPC(m, n, spares int, window time.Duration, scale float64) (simResult, error) {
	guests := &resetGuests{rng: rand.New(rand.NewPCG(uint64(n), 9)), scale: scale, started: map[string]time.Time{}}
	srv := &http.Server{Handler: guests, ReadHeaderTimeout: 10 * time.Second}
	defer srv.Close()
	var endpoints []string
	for i := 0; i < m+spares; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return simResult{}, err
		}
		endpoints = append(endpoints, "http://"+l.Addr().String())
		go srv.Serve(l) //nolint:errcheck // ends with Close
	}
	dir, err := os.MkdirTemp("", "benchvmmanager-grpcsim-")
	if err != nil {
		return simResult{}, err
	}
	defer os.RemoveAll(dir)
	env := daemon.Env{Logger: zap.NewNop(), Registry: daemon.NewRegistry(), DataDir: dir}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	svc, err := vmmanager.New(ctx, vmmanager.Config{Pools: []vmmanager.PoolSpec{{
		Name: "sim", Provider: "static", Size: m, WarmSpares: spares, HealthInterval: -1,
		ResetTimeout: vmmanager.Duration(time.Minute),
		Static:       &vmmanager.StaticSpec{Endpoints: endpoints, ResetCommand: []string{"reset"}},
	}}}, env)
	if err != nil {
		return simResult{}, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return simResult{}, err
	}
	served := make(chan error, 1)
	go func() {
		served <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: lis, Logger: zap.NewNop(), Registry: env.Registry}, svc)
	}()
	defer func() { stop(); <-served }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return simResult{}, err
	}
	defer conn.Close()
	c := rolloutmeshv1.NewVMManagerClient(conn)

	type hold struct {
		from, to time.Time
		drawn    time.Duration
	}
	var (
		mu    sync.Mutex
		holds []hold
	)
	wctx, wstop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	reset := true
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for wctx.Err() == nil {
				l, err := c.AcquireLease(wctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "sim", Holder: fmt.Sprint("w", w),
					WaitTimeout: durationpb.New(time.Minute), Ttl: durationpb.New(time.Hour)})
				if err != nil {
					return
				}
				from := time.Now()
				ep := time.Duration(lognormal(r, 120, 0.5) * float64(time.Second))
				time.Sleep(time.Duration(float64(ep) / scale))
				to := time.Now()
				mu.Lock()
				holds = append(holds, hold{from, to, ep})
				mu.Unlock()
				if _, err := c.ReleaseLease(context.WithoutCancel(wctx), &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: l.LeaseId, Token: l.Token, Reset_: &reset}); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(window / 4)
	guests.mu.Lock()
	guests.measure = true
	guests.mu.Unlock()
	t0 := time.Now()
	time.Sleep(window)
	t1 := time.Now()
	guests.mu.Lock()
	guests.measure = false
	meanDrawn := guests.drawn.Seconds() / float64(max(guests.n, 1))
	meanWall := guests.wall.Seconds() / float64(max(guests.n, 1)) * scale
	guests.mu.Unlock()
	wstop()
	wg.Wait()

	var busy time.Duration
	var epSum, epWall float64
	var epN int64
	for _, h := range holds {
		from, to := h.from, h.to
		if from.Before(t0) {
			from = t0
		}
		if to.After(t1) {
			to = t1
		}
		if to.After(from) {
			busy += to.Sub(from)
		}
		if !h.from.Before(t0) && !h.to.After(t1) {
			epSum += h.drawn.Seconds()
			epWall += h.to.Sub(h.from).Seconds() * scale
			epN++
		}
	}
	meanEp, meanEpWall := epSum/float64(max(epN, 1)), epWall/float64(max(epN, 1))
	bound := meanEp / (meanEp + meanDrawn)
	slept := meanEpWall / (meanEpWall + meanWall)
	if spares > 0 {
		bound = math.Min(1, float64(m+spares)/float64(m)*bound)
		slept = math.Min(1, float64(m+spares)/float64(m)*slept)
	}
	return simResult{busy: float64(busy) / (float64(t1.Sub(t0)) * float64(m)), bound: bound, slept: slept, leases: epN}, nil
}
