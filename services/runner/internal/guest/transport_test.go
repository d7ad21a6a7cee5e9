package guest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// Two clients of the same guest never share a connection: the next lease
// of a VM whose reset killed the previous lease's kept-alive connection
// starts on a fresh one.
func TestClientsDoNotShareConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("Linux"))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	for i := 0; i < 2; i++ {
		g, err := New(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 3; j++ {
			if _, _, err := g.do(context.Background(), http.MethodGet, "/platform", nil, "", 5*time.Second, 100); err != nil {
				t.Fatal(err)
			}
		}
		g.Close()
	}
	if got := conns.Load(); got != 2 {
		t.Errorf("connections = %d, want 2 (one per client, kept alive within it)", got)
	}
}

// readBody: a declared length sizes the read; a body shorter than declared
// or longer than the limit is an error, never a truncated answer.
func TestReadBody(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		declared int // -1: chunked
		limit    int64
		wantErr  bool
	}{
		{"declared", "hello", 5, 10, false},
		{"chunked", "hello", -1, 10, false},
		{"declared over limit", "hello world", 11, 5, true},
		{"chunked over limit", "hello world", -1, 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.declared >= 0 {
					w.Header().Set("Content-Length", strconv.Itoa(tc.declared))
				} else {
					w.(http.Flusher).Flush()
				}
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			g, _ := New(srv.URL, "")
			defer g.Close()
			got, _, err := g.do(context.Background(), http.MethodGet, "/x", nil, "", 5*time.Second, tc.limit)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && string(got) != tc.body {
				t.Errorf("body = %q, want %q", got, tc.body)
			}
		})
	}
}
