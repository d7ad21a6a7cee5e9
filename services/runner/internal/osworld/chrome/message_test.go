package chrome

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestOversizedPageIsRefused: a page whose HTML is over the DevTools
// message bound cannot make the runner read it into memory; the getter's
// read fails and says why.
func TestOversizedPageIsRefused(t *testing.T) {
	old := maxMessage
	maxMessage = 1 << 20
	t.Cleanup(func() { maxMessage = old })
	b := StartChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/big" {
			fmt.Fprintf(w, "<html><head><title>big</title></head><body>%s</body></html>", strings.Repeat("x", 3<<20))
			return
		}
		fmt.Fprint(w, "<html><head><title>small</title></head><body>small</body></html>")
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Connect(ctx, Config{Addr: b.Addr, Ready: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.NewTab(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Navigate(ctx, id, srv.URL+"/small", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// Under the bound, pages read as before.
	if p, err := c.Info(ctx, id, true); err != nil || p.Title != "small" {
		t.Fatalf("Info(small page) = %+v, %v", p, err)
	}
	// Chrome sends the page's text in DOM events while it loads and in
	// the answer to the read: one or the other is refused.
	err = c.Navigate(ctx, id, srv.URL+"/big", 20*time.Second)
	if err == nil {
		var p PageInfo
		if p, err = c.Info(ctx, id, true); err == nil {
			t.Fatalf("Info(page of 3 MiB) read %d bytes of content past a bound of 1 MiB", len(p.Content))
		}
	}
	if !strings.Contains(err.Error(), "a message from the browser is over the 1048576-byte bound") {
		t.Errorf("reading a page of 3 MiB = %v, want an error naming the bound", err)
	}
}
