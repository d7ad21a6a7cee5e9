package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestScreenshotIsRealisticAndDistinct: every answer is a valid 1280×720
// PNG of a busy desktop's size with its length declared; the screen stays
// the same until an action runs and then changes, and two guests never
// show the same bytes.
func TestScreenshotIsRealisticAndDistinct(t *testing.T) {
	shot, err := newScreenshot(1280, 720, 1)
	if err != nil {
		t.Fatal(err)
	}
	a := httptest.NewServer((&guest{id: 0, shot: shot, width: 1280, height: 720}).routes())
	defer a.Close()
	b := httptest.NewServer((&guest{id: 1, shot: shot, width: 1280, height: 720}).routes())
	defer b.Close()
	get := func(base string) []byte {
		t.Helper()
		resp, err := http.Get(base + "/screenshot")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ContentLength != int64(len(data)) {
			t.Errorf("Content-Length %d, body %d bytes", resp.ContentLength, len(data))
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("answer does not decode as PNG: %v", err)
		}
		if got := img.Bounds().Size(); got.X != 1280 || got.Y != 720 {
			t.Errorf("screenshot is %v, want 1280x720", got)
		}
		if len(data) < 100<<10 || len(data) > 300<<10 {
			t.Errorf("screenshot is %d bytes, want 100-300 KB like a busy desktop", len(data))
		}
		return data
	}
	act := func(base string) {
		t.Helper()
		resp, err := http.Post(base+"/execute", "application/json", strings.NewReader(`{"command": ["python", "-c", "pass"]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	first := get(a.URL)
	if again := get(a.URL); !bytes.Equal(first, again) {
		t.Error("two screenshots with no action between them differ; a desktop at rest gives equal ones")
	}
	act(a.URL)
	after := get(a.URL)
	if bytes.Equal(first, after) {
		t.Error("the screenshot after an action has the bytes of the one before")
	}
	if other := get(b.URL); bytes.Equal(first, other) {
		t.Error("two guests' screenshots have the same bytes")
	}
}

// TestGuestAPI: the routes a screenshot-only episode uses answer as
// OSWorld's server does, and bad bodies are refused.
func TestGuestAPI(t *testing.T) {
	shot, err := newScreenshot(64, 48, 1)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&guest{shot: shot, width: 1280, height: 720}).routes())
	defer srv.Close()
	tests := []struct {
		name, method, path, body string
		wantCode                 int
		wantBody                 string
	}{
		{"screen size", "POST", "/screen_size", "", 200, `"width":1280`},
		{"platform", "GET", "/platform", "", 200, "Linux"},
		{"terminal", "GET", "/terminal", "", 200, `"output"`},
		{"execute", "POST", "/execute", `{"command": ["python", "-c", "pass"]}`, 200, `"returncode":0`},
		{"execute without command", "POST", "/execute", `{}`, 400, "command"},
		{"actions", "POST", "/v1/actions", `[{"action_type": "CLICK"}, {"action_type": "TYPING"}]`, 200, `{"results":[{"ok":true},{"ok":true}]}`},
		{"actions not a list", "POST", "/v1/actions", `{"a": 1}`, 400, "list"},
		{"unknown route", "GET", "/nope", "", 404, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantCode || !strings.Contains(string(b), tc.wantBody) {
				t.Errorf("%s %s: got %d %q, want %d containing %q", tc.method, tc.path, resp.StatusCode, b, tc.wantCode, tc.wantBody)
			}
			if tc.wantCode == 200 && strings.HasPrefix(tc.wantBody, "{") || strings.HasPrefix(tc.wantBody, `"`) {
				var v any
				if err := json.Unmarshal(b, &v); err != nil {
					t.Errorf("answer is not JSON: %v", err)
				}
			}
		})
	}
}
