package openaihttp

import (
	"context"
	"net"
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := l.watch(server, cancel)
	defer w.stop()
	if ended(ctx, 3*watchAfter) {
		t.Fatal("request cancelled while its client is connected")
	}
	client.Close()
	if !ended(ctx, 2*time.Second) {
		t.Fatal("request not cancelled within 2s of its client hanging up")
	}
}

func TestWatchStoppedRequestLeftAlone(t *testing.T) {
	var l watchList
	client, server := tcpPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.watch(server, cancel).stop()
	client.Close()
	if ended(ctx, 4*watchAfter) {
		t.Error("a request that left the list was cancelled")
	}
	// With nothing in flight the checking goroutine ends.
	deadline := time.Now().Add(2 * time.Second)
	for {
		l.mu.Lock()
		running := l.running
		l.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("checking goroutine still running 2s after the last request left")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatchCloseCancelsInFlightAndLater(t *testing.T) {
	var l watchList
	_, server := tcpPair(t)
	var ctxs []context.Context
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		l.watch(server, cancel)
		ctxs = append(ctxs, ctx)
	}
	l.close()
	for i, ctx := range ctxs {
		if ctx.Err() == nil {
			t.Errorf("request %d in flight not cancelled by close", i)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.watch(server, cancel)
	if ctx.Err() == nil {
		t.Error("request after close not cancelled")
	}
}
