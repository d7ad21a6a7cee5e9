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
// PNG of a busy desktop's size, and no two answers have the same bytes.
func TestScreenshotIsRealisticAndDistinct(t *testing.T) {
	shot, err := newScreenshot(1280, 720, 1)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&guest{shot: shot, width: 1280, height: 720}).routes())
	defer srv.Close()
	var prev []byte
	for i := 0; i < 2; i++ {
		resp, err := http.Get(srv.URL + "/screenshot")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("answer %d does not decode as PNG: %v", i, err)
		}
		if got := img.Bounds().Size(); got.X != 1280 || got.Y != 720 {
			t.Errorf("screenshot is %v, want 1280x720", got)
		}
		if len(b) < 100<<10 || len(b) > 300<<10 {
			t.Errorf("screenshot is %d bytes, want 100-300 KB like a busy desktop", len(b))
		}
		if bytes.Equal(b, prev) {
			t.Error("two screenshots have the same bytes")
		}
		prev = b
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
