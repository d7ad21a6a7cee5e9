package daemon

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestBadInput sends malformed input to every endpoint and expects a 4xx
// answer with a JSON error body.
func TestBadInput(t *testing.T) {
	requireTools(t, "Xvfb", "openbox")
	c := start(t, Config{Xvfb: true, Width: 640, Height: 480, WindowManager: "openbox"})
	const form = "application/x-www-form-urlencoded"
	const js = "application/json"
	tests := []struct {
		name, method, path, ctype, body string
		want                            int
	}{
		{"unknown path", "GET", "/nope", "", "", 404},
		{"screenshot POST", "POST", "/screenshot", "", "", 405},
		{"screen_size GET", "GET", "/screen_size", "", "", 405},
		{"execute not json", "POST", "/execute", js, "{not json", 400},
		{"execute no command", "POST", "/execute", js, `{}`, 400},
		{"execute bad command type", "POST", "/execute", js, `{"command": 5}`, 400},
		{"execute bad list", "POST", "/execute", js, `{"command": ["a", 1]}`, 400},
		{"execute empty string", "POST", "/execute", js, `{"command": "  "}`, 400},
		{"execute bad quoting", "POST", "/execute", js, `{"command": "echo 'open"}`, 400},
		{"execute bad timeout", "POST", "/execute", js, `{"command": ["true"], "timeout": -1}`, 400},
		{"setup/execute no command", "POST", "/setup/execute", js, `{"shell": true}`, 400},
		{"verification bad wait", "POST", "/execute_with_verification", js, `{"command": ["true"], "max_wait_time": 9999}`, 400},
		{"launch no command", "POST", "/setup/launch", js, `{}`, 400},
		{"window_size no field", "POST", "/window_size", form, "", 400},
		{"window_size no match", "POST", "/window_size", form, "app_class_name=nosuchapp", 404},
		{"list_directory no path", "POST", "/list_directory", js, `{}`, 400},
		{"list_directory missing", "POST", "/list_directory", js, `{"path": "/no/such/dir"}`, 400},
		{"file no field", "POST", "/file", form, "", 400},
		{"file missing", "POST", "/file", form, "file_path=/no/such/file", 404},
		{"upload not multipart", "POST", "/setup/upload", js, `{}`, 400},
		{"upload missing parts", "POST", "/setup/upload", "multipart/form-data; boundary=X", "--X--\r\n", 400},
		{"change_wallpaper no path", "POST", "/setup/change_wallpaper", js, `{}`, 400},
		{"change_wallpaper missing", "POST", "/setup/change_wallpaper", js, `{"path": "/no/such.png"}`, 404},
		{"download no url", "POST", "/setup/download_file", js, `{"path": "/tmp/x"}`, 400},
		{"download bad scheme", "POST", "/setup/download_file", js, `{"url": "file:///etc/passwd", "path": "/tmp/x"}`, 400},
		{"open_file no path", "POST", "/setup/open_file", js, `{}`, 400},
		{"open_file missing", "POST", "/setup/open_file", js, `{"path": "/no/such/file.txt"}`, 404},
		{"activate no name", "POST", "/setup/activate_window", js, `{}`, 400},
		{"close no name", "POST", "/setup/close_window", js, `{"strict": true}`, 400},
		{"end_recording idle", "POST", "/end_recording", "", "", 400},
		{"run_python no code", "POST", "/run_python", js, `{}`, 400},
		{"run_bash no script", "POST", "/run_bash_script", js, `{}`, 400},
		{"run_bash bad dir", "POST", "/run_bash_script", js, `{"script": "true", "working_dir": "/no/such"}`, 400},
		{"run_bash bad timeout", "POST", "/run_bash_script", js, `{"script": "true", "timeout": 0}`, 400},
		{"actions not array", "POST", "/v1/actions", js, `{"action_type": "CLICK"}`, 400},
		{"actions unknown type", "POST", "/v1/actions", js, `[{"action_type": "JUMP"}]`, 400},
		{"actions off screen", "POST", "/v1/actions", js, `[{"action_type": "CLICK", "parameters": {"x": 5000, "y": 1}}]`, 400},
		{"actions bad key", "POST", "/v1/actions", js, `[{"action_type": "PRESS", "parameters": {"key": "notakey"}}]`, 400},
		{"actions bad clicks", "POST", "/v1/actions", js, `[{"action_type": "CLICK", "parameters": {"num_clicks": 9}}]`, 400},
		{"actions empty hotkey", "POST", "/v1/actions", js, `[{"action_type": "HOTKEY", "parameters": {"keys": []}}]`, 400},
		// Each WAIT is within its bound; six of a minute would hold the input
		// past the batch's.
		{"actions wait too long together", "POST", "/v1/actions", js, "[" + strings.Repeat(`{"action_type": "WAIT", "parameters": {"seconds": 60}},`, 5) + `{"action_type": "WAIT", "parameters": {"seconds": 60}}]`, 400},
		{"body too large", "POST", "/execute", js, `{"command": "` + strings.Repeat("x", 17<<20) + `"}`, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, h, body := c.do(tt.method, tt.path, tt.ctype, strings.NewReader(tt.body))
			if code != tt.want {
				t.Errorf("%s %s got %d %.300s, want %d", tt.method, tt.path, code, body, tt.want)
			}
			var e struct{ Status, Message, Error string }
			if err := json.Unmarshal(body, &e); err != nil || e.Message == "" || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
				t.Errorf("%s %s body %.300q is not a JSON error (%v)", tt.method, tt.path, body, err)
			}
		})
	}
}

func TestToken(t *testing.T) {
	c := start(t, Config{Display: DisplayNone, Token: "s3cret"})
	for _, path := range []string{"/healthz", "/platform", "/screenshot"} {
		req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
		req.Header.Set("Authorization", "Bearer wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token got %d, want 401", path, resp.StatusCode)
		}
		resp, err = http.Get(c.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a token got %d, want 401", path, resp.StatusCode)
		}
	}
	if code, _, body := c.do(http.MethodGet, "/platform", "", nil); code != 200 || string(body) != "Linux" {
		t.Errorf("/platform with the token got %d %s", code, body)
	}
}

// TestHeadless covers --display none: no X server at all.
func TestHeadless(t *testing.T) {
	c := start(t, Config{Display: DisplayNone})
	for _, tt := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/healthz", 200},
		{"GET", "/platform", 200},
		{"GET", "/terminal", 200},
		{"GET", "/screenshot", 503},
		{"POST", "/screen_size", 503},
		{"GET", "/cursor_position", 503},
		{"GET", "/accessibility", 503},
		{"POST", "/start_recording", 503},
	} {
		code, _, body := c.do(tt.method, tt.path, "", nil)
		if code != tt.want {
			t.Errorf("%s %s got %d %s, want %d", tt.method, tt.path, code, body, tt.want)
		}
	}
	code, body := c.postJSON("/v1/actions", []any{"DONE"})
	if code != 503 {
		t.Errorf("/v1/actions got %d %s, want 503", code, body)
	}
	code, body = c.postJSON("/execute", map[string]any{"command": "echo $HOME", "shell": true})
	if code != 200 || !strings.Contains(string(body), c.home) {
		t.Errorf("/execute got %d %s, want the --home in the output", code, body)
	}
	code, body = c.postJSON("/run_bash_script", map[string]any{"script": "pwd; exit 3"})
	if code != 200 || !strings.Contains(string(body), `"returncode":3`) || !strings.Contains(string(body), c.home) {
		t.Errorf("/run_bash_script got %d %s", code, body)
	}
	code, body = c.postJSON("/execute", map[string]any{"command": []string{"python", "-c", "import pyautogui; pyautogui.click(1, 1)"}})
	if code != 503 {
		t.Errorf("pyautogui without a display got %d %s, want 503", code, body)
	}
}

// TestExecuteReadsOutputAsPython: /execute reads a command's output as
// OSWorld's server does (subprocess.run with text=True): universal
// newlines in stdout and stderr, and output that is not UTF-8 answered
// with 500 and Python's UnicodeDecodeError, which OSWorld's getters read
// as None.
func TestExecuteReadsOutputAsPython(t *testing.T) {
	c := start(t, Config{Display: DisplayNone})
	st, body := c.postJSON("/execute", map[string]any{"command": `printf 'a\r\nb\rc'; printf 'x\r\ny' >&2`, "shell": true})
	var res struct{ Output, Error string }
	if err := json.Unmarshal(body, &res); st != 200 || err != nil || res.Output != "a\nb\nc" || res.Error != "x\ny" {
		t.Errorf("execute = %d %s, want output %q and error %q", st, body, "a\nb\nc", "x\ny")
	}
	for _, cmd := range []string{`printf 'ok\377'`, `printf '\342\202' >&2`} {
		st, body = c.postJSON("/execute", map[string]any{"command": cmd, "shell": true})
		if st != 500 || !strings.Contains(string(body), "codec can't decode byte") {
			t.Errorf("execute %q = %d %s, want 500 naming the byte", cmd, st, body)
		}
	}
}
