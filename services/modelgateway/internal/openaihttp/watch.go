package openaihttp

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/peerclosed"
)

// A request still running watchAfter after it started has its client
// connection checked, then again at intervals doubling up to watchMax (one
// syscall each): a request answered sooner costs a timer, and thousands of
// minutes-long generations cost a few thousand checks per second.
const (
	watchAfter = 50 * time.Millisecond
	watchMax   = 400 * time.Millisecond
)

// watcher cancels a request whose client closed its connection.
type watcher struct {
	conn   net.Conn
	cancel context.CancelFunc
	mu     sync.Mutex
	t      *time.Timer
	every  time.Duration
	done   bool
}

func watch(conn net.Conn, cancel context.CancelFunc) *watcher {
	w := &watcher{conn: conn, cancel: cancel, every: watchAfter}
	w.mu.Lock()
	w.t = time.AfterFunc(watchAfter, w.check)
	w.mu.Unlock()
	return w
}

func (w *watcher) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	if peerclosed.Closed(w.conn) {
		w.done = true
		w.cancel()
		return
	}
	w.every = min(2*w.every, watchMax)
	w.t.Reset(w.every)
}

// stop ends the watch; the request is over or no longer needs it.
func (w *watcher) stop() {
	w.mu.Lock()
	w.done = true
	w.t.Stop()
	w.mu.Unlock()
}
