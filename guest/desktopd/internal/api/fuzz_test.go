package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/command"
)

// fuzzToken is the server's token. Fuzz input never executes anything on
// the machine: only the routes in readOnlyRoutes get it; every other
// request carries a wrong token, so for routes that run commands, write
// files or download, the fuzzer reaches the authentication in front of
// them and nothing more.
const fuzzToken = "fuzz-token"

// readOnlyRoutes neither run a command, write a file nor walk the file
// system without bounds (/list_directory of / and /file of a large file
// are merely slow, so they are left out as well).
var readOnlyRoutes = map[string]bool{
	"/healthz": true, "/platform": true, "/screenshot": true, "/screen_size": true,
	"/window_size": true, "/desktop_path": true, "/wallpaper": true, "/cursor_position": true,
	"/accessibility": true, "/terminal": true, "/setup/change_wallpaper": true,
	"/end_recording": true, "/v1/actions": true,
}

// FuzzAPI sends requests built from fuzz input (method, path, content type,
// body, and whether to present the token) to the real handler over a real
// HTTP server, headless. Every answer must be a well-formed one: no 500,
// JSON error bodies, and the server healthy afterwards.
func FuzzAPI(f *testing.F) {
	home := f.TempDir()
	srv := New(Config{Token: fuzzToken, Headless: true, MaxBody: 1 << 20}, zap.NewNop(), &command.Runner{Home: home, Dir: home}, nil, nil)
	ts := httptest.NewServer(srv)
	f.Cleanup(ts.Close)
	client := ts.Client()

	seeds := []struct {
		method, path, ctype, body string
		auth                      bool
	}{
		{"GET", "/healthz", "", "", true},
		{"POST", "/v1/actions", "application/json", `[{"action_type":"CLICK","parameters":{"x":1,"y":2}}]`, true},
		{"POST", "/v1/actions", "application/json", `[{"action_type":"TYPING","parameters":{"text":"hi"}}, "DONE"]`, true},
		{"POST", "/window_size", "application/x-www-form-urlencoded", "app_class_name=xterm", true},
		{"POST", "/window_size", "multipart/form-data; boundary=X", "--X\r\nContent-Disposition: form-data; name=\"app_class_name\"\r\n\r\nx\r\n--X--\r\n", true},
		{"POST", "/setup/change_wallpaper", "application/json", `{"path": "~/nope.png"}`, true},
		{"POST", "/execute", "application/json", `{"command": ["true"]}`, false},
		{"POST", "/setup/upload", "multipart/form-data; boundary=X", "--X--\r\n", false},
		{"DELETE", "/nope", "", "", true},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.ctype, []byte(s.body), s.auth)
	}
	f.Fuzz(func(t *testing.T, method, path, ctype string, body []byte, auth bool) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?# \x00\r\n") {
			t.Skip()
		}
		token := "wrong-" + fuzzToken
		if auth && readOnlyRoutes[path] {
			token = fuzzToken
		}
		req, err := http.NewRequest(method, ts.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Skip()
		}
		if strings.IndexFunc(ctype, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) >= 0 {
			t.Skip() // not a header value net/http sends
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s %s %q %q: status %d %s", method, path, ctype, body, resp.StatusCode, b)
		}
		if token != fuzzToken && resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s %s with a wrong token: status %d, want 401", method, path, resp.StatusCode)
		}
		if resp.StatusCode >= 400 && method != http.MethodHead {
			var e struct{ Message string }
			if err := json.Unmarshal(b, &e); err != nil || e.Message == "" {
				t.Fatalf("%s %s: status %d with a body that is not a JSON error: %q", method, path, resp.StatusCode, b)
			}
		}
		hreq, _ := http.NewRequest(http.MethodGet, ts.URL+"/healthz", nil)
		hreq.Header.Set("Authorization", "Bearer "+fuzzToken)
		hresp, err := client.Do(hreq)
		if err != nil {
			t.Fatalf("healthz after %s %s: %v", method, path, err)
		}
		hresp.Body.Close()
		if hresp.StatusCode != http.StatusOK {
			t.Fatalf("healthz after %s %s: %d", method, path, hresp.StatusCode)
		}
	})
}

func validMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions:
		return true
	}
	return false
}
