package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// TestTasks checks that the three tasks parse, need nothing the runner
// lacks, and download only from the loopback server.
func TestTasks(t *testing.T) {
	srv := &server{loopback: "http://127.0.0.1:1/", bridge: "http://172.17.0.1:2/"}
	ts, err := tasks(srv, files{pages: []string{"a.html", "b.html", "c.html"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"bench-calc":   {srv.loopback + sheetName},
		"bench-chrome": nil,
		"bench-vlc":    {srv.loopback + videoName},
	}
	if len(ts) != len(want) {
		t.Fatalf("tasks() gave %d tasks, want %d", len(ts), len(want))
	}
	for _, bt := range ts {
		w, ok := want[bt.task.ID]
		if !ok {
			t.Errorf("unexpected task %s", bt.task.ID)
			continue
		}
		got := bt.task.DownloadURLs()
		if strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("%s: DownloadURLs() = %v, want %v", bt.task.ID, got, w)
		}
	}
}

// TestReadyChecks runs the chrome and vlc readiness checks against real
// HTTP servers answering as Chrome's DevTools and VLC's interface do.
func TestReadyChecks(t *testing.T) {
	urls := []any{"http://172.17.0.1:2/a.html", "http://172.17.0.1:2/b.html"}
	tests := []struct {
		name    string
		check   func(ctx context.Context, g *guest.Client) error
		port    string
		path    string
		body    string
		auth    bool
		wantErr bool
	}{
		{name: "tabs open", check: tabsOpen(urls), port: "chrome", path: "/json/list",
			body: `[{"type":"page","url":"http://172.17.0.1:2/b.html"},{"type":"page","url":"http://172.17.0.1:2/a.html"},{"type":"service_worker","url":"x"}]`},
		{name: "a tab missing", check: tabsOpen(urls), port: "chrome", path: "/json/list",
			body: `[{"type":"page","url":"http://172.17.0.1:2/a.html"},{"type":"iframe","url":"http://172.17.0.1:2/b.html"}]`, wantErr: true},
		{name: "vlc playing", check: vlcAnswers, port: "vlc", path: "/requests/status.xml", auth: true,
			body: `<?xml version="1.0" encoding="utf-8" standalone="yes" ?><root><state>playing</state></root>`},
		{name: "vlc stopped", check: vlcAnswers, port: "vlc", path: "/requests/status.xml", auth: true,
			body: `<root><state>stopped</state></root>`, wantErr: true},
		{name: "vlc wrong password", check: vlcAnswers, port: "vlc", path: "/requests/status.xml", auth: true,
			body: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != tt.path {
					http.NotFound(w, r)
					return
				}
				if _, pw, _ := r.BasicAuth(); tt.auth && (pw != "password" || tt.body == "") {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				w.Write([]byte(tt.body))
			}))
			defer hs.Close()
			g, err := guest.New("http://127.0.0.1:1", "")
			if err != nil {
				t.Fatal(err)
			}
			g.Ports = map[string]string{tt.port: strings.TrimPrefix(hs.URL, "http://")}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err = tt.check(ctx, g)
			if (err != nil) != tt.wantErr {
				t.Errorf("check = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
