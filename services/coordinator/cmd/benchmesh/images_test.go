package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadImageCounts(t *testing.T) {
	const full = `# TYPE modelgateway_image_cache_hits_total counter
modelgateway_image_cache_hits_total 97
# TYPE modelgateway_image_cache_misses_total counter
modelgateway_image_cache_misses_total 3
# TYPE modelgateway_image_cache_puts_total counter
modelgateway_image_cache_puts_total 50
`
	for _, tt := range []struct {
		name, body string
		want       imageCounts
		line       string
	}{
		{"all three", full, imageCounts{hits: 97, misses: 3, puts: 50, ok: true}, "97 references resolved, 3 missed (3.0 %"},
		{"cache off: no counters", "# TYPE up gauge\nup 1\n", imageCounts{}, "metrics not read"},
		{"not the text format", "<html>", imageCounts{}, "metrics not read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			got := readImageCounts(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
			if got != tt.want {
				t.Errorf("readImageCounts = %+v, want %+v", got, tt.want)
			}
			if !strings.Contains(got.String(), tt.line) {
				t.Errorf("String() = %q, want it to contain %q", got.String(), tt.line)
			}
		})
	}
}
