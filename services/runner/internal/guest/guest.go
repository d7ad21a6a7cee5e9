// Package guest is a client of OSWorld's in-VM HTTP API (the guest server:
// OSWorld's Flask server or desktopd), as OSWorld's PythonController and
// SetupController speak it, plus desktopd's /v1/actions extension.
package guest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

// Size limits on what the guest may send back.
const (
	maxScreenshot = 64 << 20
	maxJSON       = 32 << 20
	maxFile       = 512 << 20
)

// Client is a client of OSWorld's in-VM HTTP API (reference §1), as
// desktop_env/controllers/python.py and setup.py speak it, plus desktopd's
// /v1/actions extension.
type Client struct {
	base  string
	token string
	hc    *http.Client
	// Retries is how often an idempotent read is tried (OSWorld: 3).
	Retries int
	// RetryWait is the pause between tries (OSWorld: 5s).
	RetryWait time.Duration
	// Ports are the VM's other services by name, as its lease gives them
	// ("chrome": Chrome's DevTools as host:port).
	Ports map[string]string
}

// ChromeAddr is the VM's Chrome DevTools endpoint as ip:port, or "" when
// the lease names none. A host name is resolved: Chrome answers DevTools
// requests only for an IP or localhost in the Host header, and compose
// names a VM by its container name.
func (g *Client) ChromeAddr() string {
	addr := g.Ports["chrome"]
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if net.ParseIP(host) != nil || host == "localhost" {
		return addr
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return addr
	}
	return net.JoinHostPort(ips[0].String(), port)
}

// New returns a client for the guest server at base (http://host:port).
// token, when set, is sent as a bearer token.
func New(base, token string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("guest url %q: want http(s)://host:port", base)
	}
	// A transport of its own: connections are never shared with another
	// lease's client. A VM reset behind a kept-alive connection (a QEMU
	// snapshot restore, a restarted desktopd on the same port) leaves it
	// dead, and a POST on a dead connection fails instead of being retried.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.IdleConnTimeout = 30 * time.Second
	return &Client{
		base:      strings.TrimRight(base, "/"),
		token:     token,
		hc:        &http.Client{Transport: tr},
		Retries:   3,
		RetryWait: 2 * time.Second,
	}, nil
}

// Close closes the client's idle connections; the episode using it is over.
func (g *Client) Close() { g.hc.CloseIdleConnections() }

// Endpoint is the guest's base URL.
func (g *Client) Endpoint() string { return g.base }

// HTTPError is a non-2xx answer of the guest.
type HTTPError struct {
	Path   string
	Status int
	Body   string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("guest %s: HTTP %d: %s", e.Path, e.Status, truncate(e.Body, 512))
}

// Message is what the guest said: the message of the JSON error body
// OSWorld's server sends ({"status": "error", "message": ...}, or its
// "error"), else the body as it is.
func (e *HTTPError) Message() string {
	msg := strings.TrimSpace(e.Body)
	var body struct{ Message, Error string }
	if json.Unmarshal([]byte(e.Body), &body) == nil {
		msg = cmp.Or(body.Message, body.Error, msg)
	}
	return msg
}

// do sends one request and returns the body of a 2xx answer.
func (g *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string, timeout time.Duration, limit int64) ([]byte, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, body)
	if err != nil {
		return nil, nil, fmt.Errorf("guest %s: %w", path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("guest %s: %w: %v", path, env.ErrGuestUnreachable, err)
	}
	defer resp.Body.Close()
	data, err := readBody(resp, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("guest %s: read: %w: %v", path, env.ErrGuestUnreachable, err)
	}
	if int64(len(data)) > limit {
		return nil, nil, fmt.Errorf("guest %s: answer larger than %d bytes", path, limit)
	}
	if resp.StatusCode/100 != 2 {
		return nil, nil, &HTTPError{Path: path, Status: resp.StatusCode, Body: string(data)}
	}
	return data, resp.Header, nil
}

// readBody reads at most limit+1 bytes of the answer. A declared length
// sizes the buffer once: io.ReadAll grows it by doubling from 512 bytes,
// which for a 200 KB screenshot copies and zeroes it ten times.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= limit {
		data := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return nil, err
		}
		return data, nil
	}
	return io.ReadAll(io.LimitReader(resp.Body, limit+1))
}

func (g *Client) postJSON(ctx context.Context, path string, in any, timeout time.Duration, out any) ([]byte, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	data, _, err := g.do(ctx, http.MethodPost, path, bytes.NewReader(b), "application/json", timeout, maxJSON)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("guest %s: bad JSON answer: %v", path, err)
		}
	}
	return data, nil
}

// retry runs f up to g.Retries times while it fails with a retryable error.
func (g *Client) retry(ctx context.Context, f func() error) error {
	var err error
	for i := 0; i < max(1, g.Retries); i++ {
		if i > 0 {
			t := time.NewTimer(g.RetryWait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		if err = f(); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Screenshot returns the screen as PNG (or JPEG) bytes.
func (g *Client) Screenshot(ctx context.Context) ([]byte, error) {
	var img []byte
	err := g.retry(ctx, func() error {
		data, h, err := g.do(ctx, http.MethodGet, "/screenshot", nil, "", 10*time.Second, maxScreenshot)
		if err != nil {
			return err
		}
		if !isImage(data) && !strings.HasPrefix(h.Get("Content-Type"), "image/") {
			return fmt.Errorf("guest /screenshot: answer is not an image")
		}
		img = data
		return nil
	})
	return img, err
}

func isImage(b []byte) bool {
	return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff})
}

// Accessibility returns the accessibility tree XML.
func (g *Client) Accessibility(ctx context.Context) (string, error) {
	var out struct {
		AT *string `json:"AT"`
	}
	err := g.retry(ctx, func() error {
		data, _, err := g.do(ctx, http.MethodGet, "/accessibility", nil, "", 30*time.Second, maxJSON)
		if err != nil {
			return err
		}
		return json.Unmarshal(data, &out)
	})
	if err != nil || out.AT == nil {
		return "", err
	}
	return *out.AT, nil
}

// Terminal returns the focused terminal's text (empty when none).
func (g *Client) Terminal(ctx context.Context) (string, error) {
	var out struct {
		Output *string `json:"output"`
	}
	data, _, err := g.do(ctx, http.MethodGet, "/terminal", nil, "", 10*time.Second, maxJSON)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Output == nil {
		return "", nil
	}
	return *out.Output, nil
}

// ExecResult is /execute's answer.
type ExecResult struct {
	Status     string `json:"status"`
	Output     string `json:"output"`
	Error      string `json:"error"`
	ReturnCode int    `json:"returncode"`
	Message    string `json:"message"`
}

// Execute runs a command in the guest (POST /execute or /setup/execute).
// command is a string or a list of strings, as in OSWorld.
func (g *Client) Execute(ctx context.Context, command any, shell, setup bool) (ExecResult, error) {
	path := "/execute"
	if setup {
		path = "/setup/execute"
	}
	var out ExecResult
	_, err := g.postJSON(ctx, path, map[string]any{"command": command, "shell": shell}, 130*time.Second, &out)
	return out, err
}

// RunPythonCommand runs pyautogui code exactly as OSWorld's
// PythonController.execute_python_command sends it.
func (g *Client) RunPythonCommand(ctx context.Context, code string) (ExecResult, error) {
	cmd := []string{"python", "-c", "import pyautogui; import time; pyautogui.FAILSAFE = False; " + code}
	return g.Execute(ctx, cmd, false, false)
}

// RunPython runs a Python script through /run_python.
func (g *Client) RunPython(ctx context.Context, code string) (ExecResult, error) {
	var out struct {
		Status     string `json:"status"`
		Output     string `json:"output"`
		Error      string `json:"error"`
		Message    string `json:"message"`
		ReturnCode int    `json:"return_code"`
	}
	_, err := g.postJSON(ctx, "/run_python", map[string]any{"code": code}, 90*time.Second, &out)
	if err != nil {
		return ExecResult{}, err
	}
	return ExecResult{Status: out.Status, Output: out.Output, Error: out.Error, ReturnCode: out.ReturnCode, Message: out.Message}, nil
}

// ExecuteWithVerification is POST /setup/execute_with_verification.
func (g *Client) ExecuteWithVerification(ctx context.Context, params map[string]any) error {
	_, err := g.postJSON(ctx, "/setup/execute_with_verification", params, 130*time.Second, nil)
	return err
}

// Launch starts a program without waiting (POST /setup/launch).
func (g *Client) Launch(ctx context.Context, command any, shell bool) error {
	_, err := g.postJSON(ctx, "/setup/launch", map[string]any{"command": command, "shell": shell}, 60*time.Second, nil)
	return err
}

// OpenFile opens a file with its application and waits for its window.
func (g *Client) OpenFile(ctx context.Context, path string) error {
	_, err := g.postJSON(ctx, "/setup/open_file", map[string]any{"path": path}, 1810*time.Second, nil)
	return err
}

// Window activates or closes a window (POST /setup/activate_window or
// /setup/close_window).
func (g *Client) Window(ctx context.Context, verb, name string, strict, byClass bool) error {
	_, err := g.postJSON(ctx, "/setup/"+verb+"_window", map[string]any{"window_name": name, "strict": strict, "by_class": byClass}, 30*time.Second, nil)
	return err
}

// Upload writes data to path in the guest (multipart POST /setup/upload).
func (g *Client) Upload(ctx context.Context, path string, data []byte) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("file_path", path); err != nil {
		return err
	}
	fw, err := mw.CreateFormFile("file_data", "file")
	if err != nil {
		return err
	}
	if _, err := fw.Write(data); err != nil {
		return err
	}
	if err := mw.Close(); err != nil {
		return err
	}
	_, _, err = g.do(ctx, http.MethodPost, "/setup/upload", &buf, mw.FormDataContentType(), 600*time.Second, maxJSON)
	return err
}

// UploadFile writes the local file src to path in the guest, as Upload
// does, streaming it instead of holding it in memory. The body has a
// Content-Length, as OSWorld's MultipartEncoder sends it: a chunked upload
// is not something every guest server reads.
func (g *Client) UploadFile(ctx context.Context, path string, src *os.File) error {
	st, err := src.Stat()
	if err != nil {
		return fmt.Errorf("guest /setup/upload: %w", err)
	}
	var head, tail bytes.Buffer
	mw := multipart.NewWriter(&head)
	if err := mw.WriteField("file_path", path); err != nil {
		return err
	}
	if _, err := mw.CreateFormFile("file_data", "file"); err != nil {
		return err
	}
	// The closing boundary, written by a writer sharing the boundary.
	end := multipart.NewWriter(&tail)
	if err := end.SetBoundary(mw.Boundary()); err != nil {
		return err
	}
	if err := end.Close(); err != nil {
		return err
	}
	body := io.MultiReader(&head, io.NewSectionReader(src, 0, st.Size()), &tail)
	ctx, cancel := context.WithTimeout(ctx, 600*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/setup/upload", body)
	if err != nil {
		return fmt.Errorf("guest /setup/upload: %w", err)
	}
	req.ContentLength = int64(head.Len()) + st.Size() + int64(tail.Len())
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return err
		}
		return fmt.Errorf("guest /setup/upload: %w: %v", env.ErrGuestUnreachable, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxJSON))
	if resp.StatusCode/100 != 2 {
		return &HTTPError{Path: "/setup/upload", Status: resp.StatusCode, Body: string(data)}
	}
	return nil
}

// File fetches a file from the guest (form POST /file). A missing file gives
// an *HTTPError with Status 404.
func (g *Client) File(ctx context.Context, path string) ([]byte, error) {
	form := url.Values{"file_path": {path}}.Encode()
	data, _, err := g.do(ctx, http.MethodPost, "/file", strings.NewReader(form), "application/x-www-form-urlencoded", 120*time.Second, maxFile)
	return data, err
}

// StartRecording starts the screen recording.
func (g *Client) StartRecording(ctx context.Context) error {
	_, _, err := g.do(ctx, http.MethodPost, "/start_recording", nil, "", 30*time.Second, maxJSON)
	return err
}

// EndRecording stops the recording and returns the MP4.
func (g *Client) EndRecording(ctx context.Context) ([]byte, error) {
	data, _, err := g.do(ctx, http.MethodPost, "/end_recording", nil, "", 60*time.Second, maxFile)
	return data, err
}

// ScreenSize returns the guest's screen size.
func (g *Client) ScreenSize(ctx context.Context) (int, int, error) {
	var out struct{ Width, Height int }
	if _, err := g.postJSON(ctx, "/screen_size", nil, 10*time.Second, &out); err != nil {
		return 0, 0, err
	}
	return out.Width, out.Height, nil
}

// WindowSize returns the size of the window whose WM_CLASS names
// appClass (form POST /window_size). No such window is an *HTTPError
// (OSWorld's server answers 500, desktopd 404).
func (g *Client) WindowSize(ctx context.Context, appClass string) (int, int, error) {
	form := url.Values{"app_class_name": {appClass}}.Encode()
	var out struct{ Width, Height int }
	err := g.retry(ctx, func() error {
		data, _, err := g.do(ctx, http.MethodPost, "/window_size", strings.NewReader(form), "application/x-www-form-urlencoded", 10*time.Second, maxJSON)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &out); err != nil {
			return fmt.Errorf("guest /window_size: bad JSON answer: %v", err)
		}
		return nil
	})
	return out.Width, out.Height, err
}

// Wallpaper returns the desktop wallpaper's image bytes (POST /wallpaper).
func (g *Client) Wallpaper(ctx context.Context) ([]byte, error) {
	var img []byte
	err := g.retry(ctx, func() error {
		data, _, err := g.do(ctx, http.MethodPost, "/wallpaper", nil, "", 30*time.Second, maxFile)
		img = data
		return err
	})
	return img, err
}

// DesktopPath returns the guest user's desktop directory (POST
// /desktop_path).
func (g *Client) DesktopPath(ctx context.Context) (string, error) {
	var out struct {
		DesktopPath string `json:"desktop_path"`
	}
	_, err := g.postJSON(ctx, "/desktop_path", nil, 10*time.Second, &out)
	return out.DesktopPath, err
}

// ListDirectory returns the directory tree under path (POST
// /list_directory): {"type": "directory", "name", "children": [...]}, as
// decoded JSON.
func (g *Client) ListDirectory(ctx context.Context, path string) (map[string]any, error) {
	var out struct {
		Tree map[string]any `json:"directory_tree"`
	}
	if _, err := g.postJSON(ctx, "/list_directory", map[string]string{"path": path}, 60*time.Second, &out); err != nil {
		return nil, err
	}
	return out.Tree, nil
}

// TerminalOutput is /terminal's output, nil when the guest has no
// terminal text (JSON null), unlike Terminal, which makes that "".
func (g *Client) TerminalOutput(ctx context.Context) (*string, error) {
	var out struct {
		Output *string `json:"output"`
	}
	err := g.retry(ctx, func() error {
		data, _, err := g.do(ctx, http.MethodGet, "/terminal", nil, "", 10*time.Second, maxJSON)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &out); err != nil {
			return fmt.Errorf("guest /terminal: bad JSON answer: %v", err)
		}
		return nil
	})
	return out.Output, err
}

// ActionOutcome is desktopd's per-action answer of /v1/actions.
type ActionOutcome struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// ErrNoActionsAPI means the guest has no /v1/actions (a stock OSWorld server).
var ErrNoActionsAPI = errors.New("guest has no /v1/actions")

// Actions runs computer_13 actions in OSWorld dict form through desktopd's
// /v1/actions. It returns ErrNoActionsAPI when the guest lacks the route.
func (g *Client) Actions(ctx context.Context, actions []any) ([]ActionOutcome, error) {
	b, err := json.Marshal(actions)
	if err != nil {
		return nil, err
	}
	data, _, err := g.do(ctx, http.MethodPost, "/v1/actions", bytes.NewReader(b), "application/json", 120*time.Second, maxJSON)
	var he *HTTPError
	if errors.As(err, &he) && (he.Status == http.StatusNotFound || he.Status == http.StatusMethodNotAllowed) {
		return nil, ErrNoActionsAPI
	}
	if errors.As(err, &he) {
		// desktopd refuses a batch with an invalid action as a whole (400)
		// and says which one in "results": those are failed actions, not a
		// broken guest.
		var obj struct {
			Results []ActionOutcome `json:"results"`
		}
		if json.Unmarshal([]byte(he.Body), &obj) == nil && len(obj.Results) == len(actions) {
			for i := range obj.Results {
				if obj.Results[i].OK {
					obj.Results[i] = ActionOutcome{Error: "not performed: another action of the batch was invalid"}
				}
			}
			return obj.Results, nil
		}
	}
	if err != nil {
		return nil, err
	}
	// Accept a bare list or an object holding "results".
	var list []ActionOutcome
	if err := json.Unmarshal(data, &list); err == nil {
		return list, nil
	}
	var obj struct {
		Results []ActionOutcome `json:"results"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("guest /v1/actions: bad JSON answer: %v", err)
	}
	return obj.Results, nil
}

// Wait polls /terminal until the guest answers, as SetupController does
// before the first step (up to tries × interval).
func (g *Client) Wait(ctx context.Context, tries int, interval time.Duration) error {
	var err error
	for i := 0; i < tries; i++ {
		if _, _, err = g.do(ctx, http.MethodGet, "/terminal", nil, "", 5*time.Second, maxJSON); err == nil {
			return nil
		}
		var he *HTTPError
		if errors.As(err, &he) {
			return nil // the server answers; the route may just not apply
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
