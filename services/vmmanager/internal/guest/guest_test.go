package guest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestProbesReuseOneConnectionPerGuest probes more guests than Go's default
// transport keeps idle connections for (100 in all), three rounds over
// every guest, and wants each guest to have accepted one connection: a
// reset's readiness probe must not cost a connect at every guest when a
// vmmanager serves hundreds of them.
func TestProbesReuseOneConnectionPerGuest(t *testing.T) {
	const guests, rounds = 150, 3
	var accepted atomic.Int64
	urls := make([]string, guests)
	for i := range urls {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				accepted.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	var c Client
	ctx := context.Background()
	for r := 0; r < rounds; r++ {
		for _, u := range urls {
			if err := c.Probe(ctx, u, "/screenshot", ""); err != nil {
				t.Fatalf("round %d: Probe(%s): %v", r, u, err)
			}
		}
	}
	if got, want := accepted.Load(), int64(guests); got != want {
		t.Errorf("connections accepted over %d rounds of %d guests = %d, want %d (one per guest)", rounds, guests, got, want)
	}
}
