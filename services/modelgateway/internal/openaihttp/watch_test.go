package openaihttp

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func ended(ctx context.Context, within time.Duration) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(within):
		return false
	}
}

func TestWatchCancelsWhenClientHangsUp(t *testing.T) {
	var l watchList
	client, server := tcpPair(t)
	c := l.begin(server, time.Now(), 0)
	defer c.leave()
	if ended(c, 3*watchAfter) {
		t.Fatal("request cancelled while its client is connected")
	}
	client.Close()
	if !ended(c, 2*time.Second) {
		t.Fatal("request not cancelled within 2s of its client hanging up")
	}
	if got := c.Err(); got != context.Canceled {
		t.Errorf("Err() = %v, want %v", got, context.Canceled)
	}
}

func TestWatchStoppedRequestLeftAlone(t *testing.T) {
	var l watchList
	client, server := tcpPair(t)
	c := l.begin(server, time.Now(), time.Millisecond)
	c.leave()
	client.Close()
	if ended(c, 4*watchAfter) {
		t.Error("a request that left the list was cancelled")
	}
	// With nothing in flight the checking goroutine ends.
	deadline := time.Now().Add(30 * time.Second)
	for {
		l.mu.Lock()
		running := l.running
		l.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("checking goroutine still running 30s after the last request left")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatchCloseCancelsInFlightAndLater(t *testing.T) {
	var l watchList
	_, server := tcpPair(t)
	var calls []*call
	for range 3 {
		calls = append(calls, l.begin(server, time.Now(), 0))
	}
	l.close()
	for i, c := range calls {
		if c.Err() == nil {
			t.Errorf("request %d in flight not cancelled by close", i)
		}
	}
	if c := l.begin(server, time.Now(), 0); c.Err() == nil {
		t.Error("request after close not cancelled")
	}
}

// TestWatchDeadline: a call ends with DeadlineExceeded once its deadline
// has passed (to within the list's tick), reports the deadline, and one
// without a timeout has none.
func TestWatchDeadline(t *testing.T) {
	var l watchList
	_, server := tcpPair(t)
	timeout := 2 * watchAfter
	c := l.begin(server, time.Now(), timeout)
	defer c.leave()
	dl, ok := c.Deadline()
	if !ok || dl.Sub(c.start) != timeout {
		t.Errorf("Deadline() = %v, %v; want start+%v, true", dl, ok, timeout)
	}
	if ended(c, timeout-watchAfter/2) {
		t.Fatal("request ended before its deadline")
	}
	if !ended(c, 2*time.Second) {
		t.Fatal("request not ended within 2s of its deadline")
	}
	if got := c.Err(); got != context.DeadlineExceeded {
		t.Errorf("Err() = %v, want %v", got, context.DeadlineExceeded)
	}
	if got := context.Cause(c); got != context.DeadlineExceeded {
		t.Errorf("context.Cause = %v, want %v", got, context.DeadlineExceeded)
	}
	none := l.begin(server, time.Now(), 0)
	defer none.leave()
	if _, ok := none.Deadline(); ok {
		t.Error("a call without a timeout has a deadline")
	}
}

// TestCallInterruptsBackendConn: a backend connection handed to a call is
// interrupted when the call ends (a blocked read returns), or at once if it
// has; one released before the end is left alone and reported reusable.
func TestCallInterruptsBackendConn(t *testing.T) {
	var l watchList
	_, server := tcpPair(t)

	t.Run("interrupted at the end", func(t *testing.T) {
		c := l.begin(server, time.Now(), 0)
		_, conn := tcpPair(t)
		c.InterruptConn(conn)
		read := make(chan error, 1)
		go func() {
			_, err := conn.Read(make([]byte, 1))
			read <- err
		}()
		c.leave()
		c.cancel(context.Canceled)
		select {
		case err := <-read:
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("read on the interrupted connection: %v, want a deadline error", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("read still blocked 30s after the call ended")
		}
		if c.ReleaseConn(conn) {
			t.Error("ReleaseConn of an interrupted connection = true, want false")
		}
	})
	t.Run("released before the end", func(t *testing.T) {
		c := l.begin(server, time.Now(), 0)
		_, conn := tcpPair(t)
		c.InterruptConn(conn)
		if !c.ReleaseConn(conn) {
			t.Fatal("ReleaseConn before the end = false, want true")
		}
		c.leave()
		c.cancel(context.Canceled)
		// A deadline moved to the past would fail the write at once.
		if n, err := conn.Write([]byte("x")); n != 1 || err != nil {
			t.Errorf("write on the released connection: %d, %v", n, err)
		}
	})
	t.Run("handed over after the end", func(t *testing.T) {
		c := l.begin(server, time.Now(), 0)
		c.leave()
		c.cancel(context.Canceled)
		_, conn := tcpPair(t)
		c.InterruptConn(conn)
		if _, err := conn.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("write on a connection handed to an ended call: %v, want a deadline error", err)
		}
		if c.ReleaseConn(conn) {
			t.Error("ReleaseConn after the end = true, want false")
		}
	})
}
