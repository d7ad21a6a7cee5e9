package guest

import "testing"

// TestChromeAddr: the DevTools address comes from the lease's ports, a
// container name resolved to an IP (Chrome refuses other Host headers).
func TestChromeAddr(t *testing.T) {
	tests := []struct {
		ports map[string]string
		want  string
	}{
		{nil, ""},
		{map[string]string{"vlc": "127.0.0.1:8080"}, ""},
		{map[string]string{"chrome": "127.0.0.1:32770"}, "127.0.0.1:32770"},
		{map[string]string{"chrome": "localhost:9222"}, "localhost:9222"},
		{map[string]string{"chrome": "not-an-address"}, ""},
	}
	for _, tt := range tests {
		g, err := New("http://127.0.0.1:5000", "")
		if err != nil {
			t.Fatal(err)
		}
		g.Ports = tt.ports
		if got := g.ChromeAddr(); got != tt.want {
			t.Errorf("ChromeAddr(%v) = %q, want %q", tt.ports, got, tt.want)
		}
	}
}

// TestHTTPErrorMessage: the message of OSWorld's JSON error body, its
// "error" without one, else the body.
func TestHTTPErrorMessage(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"status": "error", "message": "Path not found: /x", "error": "other"}`, "Path not found: /x"},
		{`{"error": "no window with WM_CLASS \"vlc\""}` + "\n", `no window with WM_CLASS "vlc"`},
		{"Internal Server Error\n", "Internal Server Error"},
		{`{"status": "error"}`, `{"status": "error"}`},
	}
	for _, tt := range tests {
		if got := (&HTTPError{Path: "/x", Status: 500, Body: tt.body}).Message(); got != tt.want {
			t.Errorf("Message() of %q = %q, want %q", tt.body, got, tt.want)
		}
	}
}
