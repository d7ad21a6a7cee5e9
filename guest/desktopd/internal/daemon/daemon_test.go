package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// requireTools skips the test when a tool is missing, or fails it when
// CI is set (CI installs them).
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required when CI is set: %v", tool, err)
			}
			t.Skipf("%s not installed (apt-get install xvfb openbox xterm mousepad ffmpeg dbus at-spi2-core): %v", tool, err)
		}
	}
}

type client struct {
	t     *testing.T
	base  string
	token string
	home  string
}

// start runs desktopd in-process with cfg and returns a client once it
// is ready; the test's cleanup stops it and checks it stopped cleanly.
func start(t *testing.T, cfg Config) *client {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Home == "" {
		cfg.Home = t.TempDir()
	}
	ready := make(chan string, 1)
	cfg.Ready = func(addr string) { ready <- addr }
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg, zaptest.NewLogger(t)) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-errc:
		cancel()
		t.Fatalf("desktopd stopped at start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("desktopd not ready within 60s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("desktopd stopped with %v, want a clean stop", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("desktopd did not stop within 30s")
		}
	})
	return &client{t: t, base: "http://" + addr, token: cfg.Token, home: cfg.Home}
}

func (c *client) do(method, path, contentType string, body io.Reader) (int, http.Header, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func (c *client) postJSON(path string, v any) (int, []byte) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	code, _, body := c.do(http.MethodPost, path, "application/json", bytes.NewReader(b))
	return code, body
}

func (c *client) screenshot() image.Image {
	c.t.Helper()
	code, h, body := c.do(http.MethodGet, "/screenshot", "", nil)
	if code != 200 || h.Get("Content-Type") != "image/png" {
		c.t.Fatalf("screenshot: %d %s", code, body)
	}
	img, err := png.Decode(bytes.NewReader(body))
	if err != nil {
		c.t.Fatalf("screenshot decode: %v", err)
	}
	return img
}

// waitWindow waits until a window of WM_CLASS cls is mapped and returns
// its geometry through /accessibility's X fallback-independent
// /window_size.
func (c *client) waitWindow(cls string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		code, _, _ := c.do(http.MethodPost, "/window_size", "application/x-www-form-urlencoded", strings.NewReader("app_class_name="+cls))
		if code == 200 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("no %s window within 20s", cls)
}

// waitFile polls /execute cat until the file has want.
func (c *client) waitFile(path, want string) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		code, body := c.postJSON("/execute", map[string]any{"command": []string{"cat", path}, "shell": false})
		var res struct {
			Output     string `json:"output"`
			Returncode int    `json:"returncode"`
		}
		_ = json.Unmarshal(body, &res)
		last = fmt.Sprintf("%d %s", code, body)
		if code == 200 && res.Returncode == 0 && res.Output == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("%s never held %q; last /execute answer: %s", path, want, last)
}

func changedPixels(a, b image.Image) int {
	n := 0
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if a.At(x, y) != b.At(x, y) {
				n++
			}
		}
	}
	return n
}

func TestDesktop(t *testing.T) {
	requireTools(t, "Xvfb", "openbox", "xterm", "mousepad", "ffmpeg", "ffprobe")
	c := start(t, Config{Xvfb: true, Width: 1024, Height: 768, WindowManager: "openbox", SessionBus: true})

	t.Run("screen size", func(t *testing.T) {
		code, _, body := c.do(http.MethodPost, "/screen_size", "", nil)
		if code != 200 || strings.TrimSpace(string(body)) != `{"height":768,"width":1024}` {
			t.Errorf("screen_size got %d %s", code, body)
		}
	})

	// One xterm serves both typing paths. Its shell starts in the home
	// and writes a file before each prompt: keys typed before the first
	// one could be lost while the shell sets the terminal up.
	ready := filepath.Join(c.home, "shell-ready")
	launch := []string{"xterm", "-geometry", "80x20+0+0", "-e", "env", "PROMPT_COMMAND=echo ready > " + ready, "bash"}
	if code, body := c.postJSON("/setup/launch", map[string]any{"command": launch}); code != 200 {
		t.Fatalf("launch xterm: %d %s", code, body)
	}
	c.waitWindow("xterm")
	c.waitFile(ready, "ready\n")

	t.Run("type through /v1/actions", func(t *testing.T) {
		before := c.screenshot()
		out := filepath.Join(c.home, "actions.txt")
		code, body := c.postJSON("/v1/actions", []any{
			map[string]any{"action_type": "CLICK", "parameters": map[string]any{"x": 100, "y": 100}},
			map[string]any{"action_type": "TYPING", "parameters": map[string]any{"text": "echo ok-ünï-€ > " + out}},
			map[string]any{"action_type": "PRESS", "parameters": map[string]any{"key": "enter"}},
			"WAIT",
		})
		if code != 200 || !strings.Contains(string(body), `"ok":true`) {
			t.Fatalf("actions got %d %s", code, body)
		}
		c.waitFile(out, "ok-ünï-€\n")
		after := c.screenshot()
		if n := changedPixels(before, after); n < 100 {
			t.Errorf("only %d pixels changed after typing, want the command on screen", n)
		}
	})

	t.Run("type through pyautogui code", func(t *testing.T) {
		out := filepath.Join(c.home, "pyautogui.txt")
		code := fmt.Sprintf("import pyautogui; import time; pyautogui.FAILSAFE = False; pyautogui.click(100, 100); pyautogui.typewrite('echo from-pyautogui > %s'); pyautogui.press('enter')", out)
		st, body := c.postJSON("/execute", map[string]any{"command": []string{"python", "-c", code}, "shell": false})
		if st != 200 || !strings.Contains(string(body), `"returncode":0`) {
			t.Fatalf("execute got %d %s", st, body)
		}
		c.waitFile(out, "from-pyautogui\n")
	})

	t.Run("pyautogui syntax error", func(t *testing.T) {
		st, body := c.postJSON("/execute", map[string]any{"command": []string{"python", "-c", "import pyautogui; pyautogui.click(1, 2"}})
		if st != 200 || !strings.Contains(string(body), "SyntaxError") || !strings.Contains(string(body), `"returncode":1`) {
			t.Errorf("got %d %s, want a SyntaxError with returncode 1", st, body)
		}
	})

	t.Run("upload and download", func(t *testing.T) {
		data := make([]byte, 300000)
		for i := range data {
			data[i] = byte(i * 7)
		}
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("file_path", "~/sub/dir/blob.bin")
		fw, _ := mw.CreateFormFile("file_data", "blob.bin")
		_, _ = fw.Write(data)
		mw.Close()
		code, _, body := c.do(http.MethodPost, "/setup/upload", mw.FormDataContentType(), &buf)
		if code != 200 || string(body) != "File Uploaded: 300000 bytes" {
			t.Fatalf("upload got %d %s", code, body)
		}
		code, h, got := c.do(http.MethodPost, "/file", "application/x-www-form-urlencoded", strings.NewReader("file_path=~/sub/dir/blob.bin"))
		if code != 200 || !bytes.Equal(got, data) || !strings.Contains(h.Get("Content-Disposition"), "blob.bin") {
			t.Errorf("download got %d, %d bytes (equal %v), disposition %q", code, len(got), bytes.Equal(got, data), h.Get("Content-Disposition"))
		}
		code, body = c.postJSON("/list_directory", map[string]string{"path": "~/sub"})
		if code != 200 || !strings.Contains(string(body), `"name":"blob.bin"`) {
			t.Errorf("list_directory got %d %s", code, body)
		}
	})

	t.Run("recording", func(t *testing.T) {
		if code, body := c.postJSON("/start_recording", nil); code != 200 {
			t.Fatalf("start_recording got %d %s", code, body)
		}
		if code, body := c.postJSON("/start_recording", nil); code != 400 {
			t.Errorf("second start_recording got %d %s, want 400", code, body)
		}
		_, _ = c.postJSON("/v1/actions", []any{map[string]any{"action_type": "MOVE_TO", "parameters": map[string]any{"x": 500, "y": 500}}})
		time.Sleep(time.Second)
		code, _, mp4 := c.do(http.MethodPost, "/end_recording", "", nil)
		if code != 200 {
			t.Fatalf("end_recording got %d %s", code, mp4)
		}
		f := filepath.Join(t.TempDir(), "rec.mp4")
		if err := os.WriteFile(f, mp4, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", f).Output()
		if err != nil {
			t.Fatalf("ffprobe: %v", err)
		}
		var dur float64
		if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &dur); err != nil || dur <= 0 {
			t.Errorf("recording duration %q, want > 0", out)
		}
	})

	t.Run("accessibility tree has the editor", func(t *testing.T) {
		if code, body := c.postJSON("/setup/launch", map[string]any{"command": "mousepad"}); code != 200 {
			t.Fatalf("launch mousepad: %d %s", code, body)
		}
		c.waitWindow("mousepad")
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, _, body := c.do(http.MethodGet, "/accessibility", "", nil)
			var res struct{ AT string }
			if err := json.Unmarshal(body, &res); code != 200 || err != nil {
				t.Fatalf("accessibility got %d %s", code, body)
			}
			root, names := parseTree(t, res.AT)
			if root != "desktop-frame" {
				t.Fatalf("root element %q, want desktop-frame", root)
			}
			if strings.Contains(names, "Mousepad") {
				t.Logf("tree of %d bytes, source %s", len(res.AT), sourceOf(res.AT))
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no Mousepad window in the tree: %.2000s", res.AT)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})

	t.Run("windows", func(t *testing.T) {
		if code, body := c.postJSON("/setup/activate_window", map[string]any{"window_name": "xterm", "by_class": true}); code != 200 {
			t.Errorf("activate_window got %d %s", code, body)
		}
		if code, body := c.postJSON("/setup/activate_window", map[string]any{"window_name": "no such window"}); code != 404 {
			t.Errorf("activate_window of a missing window got %d %s, want 404", code, body)
		}
	})
}

func sourceOf(at string) string {
	if i := strings.Index(at, `source="`); i >= 0 {
		rest := at[i+8:]
		return rest[:strings.IndexByte(rest, '"')]
	}
	return "?"
}

// parseTree checks the XML parses and returns the root name and all name
// attributes joined.
func parseTree(t *testing.T, at string) (string, string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(at))
	root := ""
	var names []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("accessibility XML does not parse: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			for _, a := range se.Attr {
				if a.Name.Local == "name" && a.Name.Space == "" {
					names = append(names, a.Value)
				}
			}
		}
	}
	return root, strings.Join(names, "\n")
}

// TestStartTimeout: a start-up wait that runs past --start-timeout stops
// desktopd with an error naming the wait and the bound, not a hang.
func TestStartTimeout(t *testing.T) {
	requireTools(t, "Xvfb", "openbox")
	cfg := Config{Addr: "127.0.0.1:0", Xvfb: true, Width: 640, Height: 480, WindowManager: "openbox",
		Home: t.TempDir(), StartTimeout: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, cfg, zaptest.NewLogger(t))
	if err == nil || !strings.Contains(err.Error(), "1ms") {
		t.Fatalf("Run with a 1ms start timeout = %v, want an error naming the 1ms bound", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Run returned only when the test's own deadline passed: %v", err)
	}
}
