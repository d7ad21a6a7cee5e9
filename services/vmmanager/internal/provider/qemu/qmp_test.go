package qemu

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
)

// qmpServer listens on a unix socket in a short directory and runs serve
// on every connection it accepts, until the test ends.
func qmpServer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "qmp")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "qmp.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); serve(c) }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		os.RemoveAll(dir)
	})
	return sock
}

// silent accepts and never writes; it holds the connection open until the
// client closes it.
func silent(c net.Conn) {
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// greetThenSilent greets, answers qmp_capabilities, then never answers.
func greetThenSilent(c net.Conn) {
	c.Write([]byte(`{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": []}}` + "\n"))
	sc := bufio.NewScanner(c)
	if sc.Scan() {
		c.Write([]byte(`{"return": {}}` + "\n"))
	}
	silent(c)
}

// scripted greets and answers each command with the next of answers (an
// answer may be several lines: events before the return).
func scripted(answers ...string) func(net.Conn) {
	return func(c net.Conn) {
		c.Write([]byte(`{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": []}}` + "\n"))
		sc := bufio.NewScanner(c)
		for _, a := range append([]string{`{"return": {}}`}, answers...) {
			if !sc.Scan() {
				return
			}
			c.Write([]byte(a + "\n"))
		}
		silent(c)
	}
}

// qmpGoroutines lists the goroutines running this package's QMP code.
func qmpGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "qemu.dialQMP") || strings.Contains(g, "qemu.(*qmpSession)") || strings.Contains(g, "qemu.qmpDo") {
			out = append(out, g)
		}
	}
	return out
}

// TestQMPDeadlines: a QEMU whose monitor never answers (a unix listener
// that accepts and stays silent, or one that greets and then goes quiet)
// costs the caller its ctx and not a moment more, and leaves no goroutine
// behind.
func TestQMPDeadlines(t *testing.T) {
	p := unitProvider(t, config.QEMU{})
	tests := []struct {
		name   string
		serve  func(net.Conn)
		cancel bool // cancel ctx instead of letting its deadline pass
		want   error
	}{
		{"silent from the start", silent, false, context.DeadlineExceeded},
		{"silent after the handshake", greetThenSilent, false, context.DeadlineExceeded},
		{"cancelled while silent", silent, true, context.Canceled},
		{"cancelled after the handshake", greetThenSilent, true, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := qmpServer(t, tc.serve)
			inst := pool.Instance{Data: map[string]string{dataQMP: sock}}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			if tc.cancel {
				// No deadline: qmpDo's own bound is minutes away.
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(300*time.Millisecond, cancel)
			}
			defer cancel()
			start := time.Now()
			_, err := p.Status(ctx, inst)
			took := time.Since(start)
			if !errors.Is(err, tc.want) {
				t.Errorf("Status = %v, want %v", err, tc.want)
			}
			if took > 2*time.Second {
				t.Errorf("Status returned after %v, want about 300ms", took)
			}
			_, err = p.hmp(ctx, inst, "loadvm ready")
			if !errors.Is(err, tc.want) {
				t.Errorf("hmp after ctx ended = %v, want %v", err, tc.want)
			}
			var left []string
			for i := 0; i < 100; i++ {
				if left = qmpGoroutines(); len(left) == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Errorf("%d QMP goroutines outlived the call:\n%s", len(left), strings.Join(left, "\n\n"))
			}
		})
	}
}

// TestQMPSession: answers are matched past QEMU's asynchronous events, and
// QMP and HMP errors come back as errors.
func TestQMPSession(t *testing.T) {
	p := unitProvider(t, config.QEMU{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	inst := func(answers ...string) pool.Instance {
		return pool.Instance{Data: map[string]string{dataQMP: qmpServer(t, scripted(answers...))}}
	}
	st, err := p.Status(ctx, inst(`{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "RESUME"}`+"\n"+
		`{"return": {"status": "running", "singlestep": false, "running": true}}`))
	if err != nil || st != "running" {
		t.Errorf("Status = %q, %v; want running", st, err)
	}
	_, err = p.Status(ctx, inst(`{"error": {"class": "GenericError", "desc": "no way"}}`))
	if err == nil || !strings.Contains(err.Error(), "no way") {
		t.Errorf("Status on a QMP error = %v, want it named", err)
	}
	out, err := p.hmp(ctx, inst(`{"return": "List of snapshots present on all disks:\r\nID        TAG               VM SIZE                DATE     VM CLOCK     ICOUNT\r\n--        ready             62.6 MiB 2026-11-25 17:40:01 00:00:21.870\r\n"}`), "info snapshots")
	if err != nil || len(parseSnapshots(out)) != 1 {
		t.Errorf("hmp info snapshots = %q, %v", out, err)
	}
	_, err = p.hmp(ctx, inst(`{"return": "Error: Snapshot 'nosuch' does not exist in one or more devices\r\n"}`), "loadvm nosuch")
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("hmp loadvm of a missing snapshot = %v, want its error", err)
	}
	_, err = p.Status(ctx, inst(`not json`))
	if err == nil {
		t.Error("Status on a garbled answer succeeded")
	}
	_, err = p.Status(ctx, pool.Instance{Data: map[string]string{dataQMP: qmpServer(t, func(c net.Conn) { c.Write([]byte("hello\n")) })}})
	if err == nil || !strings.Contains(err.Error(), "not a QMP greeting") {
		t.Errorf("Status against a non-QMP server = %v", err)
	}
}
