// Package api serves OSWorld's in-VM HTTP API (desktop_env/server/main.py)
// over a real X display, plus desktopd's own extensions: GET /healthz and
// POST /v1/actions. Every error answer is JSON, {"status": "error",
// "message": m, "error": m}, so that clients reading either of OSWorld's
// error shapes find the text.
package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/a11y"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/command"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/input"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/recording"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/x11"
)

// Config holds the server's limits and identity.
type Config struct {
	// Token, when set, is required as "Authorization: Bearer <token>".
	Token string
	// MaxUpload bounds /setup/upload and /setup/download_file, in bytes.
	MaxUpload int64
	// MaxBody bounds JSON and form request bodies, in bytes.
	MaxBody int64
	// Headless is true for --display none: screen and input endpoints
	// answer 503 and /healthz is ready without a display.
	Headless bool
	// A11yTimeout bounds one /accessibility request: a walk still running
	// then answers with what it gathered (the root says truncated="true").
	// When the AT-SPI walk fails, the X window tree gets what is left of
	// it, but at least minX11Tree. Default DefaultA11yTimeout.
	A11yTimeout time.Duration
}

// DefaultA11yTimeout is the default of Config.A11yTimeout: well under the
// 30 s the runner waits for an observation, and long enough for a desktop
// with several applications (each node costs two pipelined round trips).
const DefaultA11yTimeout = 10 * time.Second

// Server is the HTTP API. Create it with New, attach the display with
// SetDisplay once the desktop is ready.
type Server struct {
	log  *zap.Logger
	cfg  Config
	run  *command.Runner
	rec  *recording.Recorder
	at   *a11y.ATSPI
	mux  map[string]route
	disp atomic.Pointer[desktop]

	wallMu    sync.Mutex
	wallpaper string // the file last set by /setup/change_wallpaper
	wallGS    string // picture-uri right after it was set
}

type desktop struct {
	d   *x11.Display
	in  *input.Controller
	err error // set when the display was lost
}

type route struct {
	methods []string
	h       handlerFunc
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// New builds the server. run executes guest commands; rec and at may be
// nil when recording or AT-SPI are unavailable.
func New(cfg Config, logger *zap.Logger, run *command.Runner, rec *recording.Recorder, at *a11y.ATSPI) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 16 << 20
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = 2 << 30
	}
	s := &Server{log: logger, cfg: cfg, run: run, rec: rec, at: at}
	get, post := []string{http.MethodGet, http.MethodHead}, []string{http.MethodPost}
	s.mux = map[string]route{
		"/healthz":                         {get, s.healthz},
		"/screenshot":                      {get, s.screenshot},
		"/execute":                         {post, s.execute},
		"/setup/execute":                   {post, s.execute},
		"/execute_with_verification":       {post, s.executeWithVerification},
		"/setup/execute_with_verification": {post, s.executeWithVerification},
		"/setup/launch":                    {post, s.launch},
		"/accessibility":                   {get, s.accessibility},
		"/terminal":                        {get, s.terminal},
		"/screen_size":                     {post, s.screenSize},
		"/window_size":                     {post, s.windowSize},
		"/desktop_path":                    {post, s.desktopPath},
		"/wallpaper":                       {post, s.getWallpaper},
		"/list_directory":                  {post, s.listDirectory},
		"/file":                            {post, s.file},
		"/setup/upload":                    {post, s.upload},
		"/platform":                        {get, s.platform},
		"/cursor_position":                 {get, s.cursorPosition},
		"/setup/change_wallpaper":          {post, s.changeWallpaper},
		"/setup/download_file":             {post, s.downloadFile},
		"/setup/open_file":                 {post, s.openFile},
		"/setup/activate_window":           {post, s.activateWindow},
		"/setup/close_window":              {post, s.closeWindow},
		"/start_recording":                 {post, s.startRecording},
		"/end_recording":                   {post, s.endRecording},
		"/run_python":                      {post, s.runPython},
		"/run_bash_script":                 {post, s.runBashScript},
		"/v1/actions":                      {post, s.actions},
	}
	return s
}

// SetDisplay attaches the X display; the screen and input endpoints work
// from then on.
func (s *Server) SetDisplay(d *x11.Display) {
	s.disp.Store(&desktop{d: d, in: input.New(d)})
}

// DisplayLost marks the display gone: health turns unready.
func (s *Server) DisplayLost(err error) {
	s.disp.Store(&desktop{err: err})
}

// Ready reports whether the server can serve every endpoint it offers.
func (s *Server) Ready() bool {
	if s.cfg.Headless {
		return true
	}
	d := s.disp.Load()
	return d != nil && d.d != nil
}

// Deadlines for reading a request body: JSON and forms are small, uploads
// may be up to MaxUpload (2 GiB by default).
const (
	bodyDeadline   = time.Minute
	uploadDeadline = time.Hour
)

// apiError is an error answer with its HTTP status.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return errorf(http.StatusBadRequest, format, args...)
}

// badBody is the answer to a body that could not be read or parsed: 413
// when it was over its size limit (the *http.MaxBytesError is kept for
// ServeHTTP, which names the limit), 400 otherwise. Every reader of a
// body goes through it, so that no size error turns into a 400.
func badBody(err error, format string, args ...any) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return mbe
	}
	if errors.Is(err, multipart.ErrMessageTooLarge) {
		return errorf(http.StatusRequestEntityTooLarge, "form fields larger than the form limit")
	}
	return badRequest(format+": %v", append(args, err)...)
}

// display returns the desktop or a 503.
func (s *Server) display() (*desktop, error) {
	if s.cfg.Headless {
		return nil, errorf(http.StatusServiceUnavailable, "no display: desktopd runs with --display none")
	}
	d := s.disp.Load()
	if d == nil {
		return nil, errorf(http.StatusServiceUnavailable, "display not ready yet")
	}
	if d.d == nil {
		return nil, errorf(http.StatusServiceUnavailable, "display lost: %v", d.err)
	}
	return d, nil
}

// ServeHTTP applies, outermost first: panic recovery (a bug answers 500,
// never kills the server), request logging, the bearer token, body size
// limits, then routing with JSON 404/405 answers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panic", zap.String("path", r.URL.Path), zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
			if !sw.wrote {
				writeError(sw, http.StatusInternalServerError, "internal error")
			}
		}
		d := time.Since(start)
		fields := []zap.Field{zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", sw.status), zap.Duration("duration", d)}
		if sw.status >= 500 || d > 5*time.Second {
			s.log.Info("request", fields...)
		} else {
			s.log.Debug("request", fields...)
		}
	}()
	if s.cfg.Token != "" {
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) != 1 {
			sw.Header().Set("WWW-Authenticate", `Bearer realm="desktopd"`)
			writeError(sw, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
	}
	rt, ok := s.mux[r.URL.Path]
	if !ok {
		writeError(sw, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
		return
	}
	allowed := false
	for _, m := range rt.methods {
		if r.Method == m {
			allowed = true
		}
	}
	if !allowed {
		sw.Header().Set("Allow", strings.Join(rt.methods, ", "))
		writeError(sw, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
		return
	}
	// A body has a deadline as well as a size limit: a client that sends
	// it a byte a minute would otherwise hold a handler for ever.
	deadline := bodyDeadline
	if r.URL.Path != "/setup/upload" {
		r.Body = http.MaxBytesReader(sw, r.Body, s.cfg.MaxBody)
	} else {
		deadline = uploadDeadline
	}
	_ = http.NewResponseController(sw).SetReadDeadline(time.Now().Add(deadline))
	if err := rt.h(sw, r); err != nil {
		var ae *apiError
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &ae):
			writeError(sw, ae.status, ae.msg)
		case errors.As(err, &mbe):
			writeError(sw, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", mbe.Limit))
		case errors.Is(err, context.Canceled):
			writeError(sw, 499, "client went away")
		default:
			writeError(sw, http.StatusInternalServerError, err.Error())
		}
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // the accessibility XML stays readable
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"status": "error", "message": msg, "error": msg})
}

func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8") // what Flask sends for a str
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text))
}

// decodeJSON reads a JSON object body into v; any content type is
// accepted, as long as the body is a JSON object.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		return badBody(err, "request body must be a JSON object")
	}
	return nil
}

// maxURLEncodedForm is net/http's limit for a urlencoded body.
const maxURLEncodedForm = 10 << 20

// formValue reads a field from a urlencoded or multipart form, or from a
// JSON object body.
func formValue(r *http.Request, name string) (string, error) {
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/json") {
		var m map[string]any
		if err := decodeJSON(r, &m); err != nil {
			return "", err
		}
		v, _ := m[name].(string)
		return v, nil
	}
	if strings.HasPrefix(ct, "multipart/form-data") {
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			return "", badBody(err, "bad multipart form")
		}
	} else {
		// net/http refuses a urlencoded form over 10 MiB with a plain
		// error; a reader with that limit makes it a size error (413).
		r.Body = http.MaxBytesReader(nil, r.Body, maxURLEncodedForm)
		if err := r.ParseForm(); err != nil {
			return "", badBody(err, "bad form")
		}
	}
	return r.PostFormValue(name), nil
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	body := map[string]any{"status": "ok", "headless": s.cfg.Headless}
	if !s.cfg.Headless {
		d := s.disp.Load()
		switch {
		case d == nil:
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "starting"})
			return nil
		case d.d == nil:
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "error", "message": fmt.Sprint(d.err)})
			return nil
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := d.d.Ping(ctx); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "error", "message": "X server not answering: " + err.Error()})
			return nil
		}
		wd, ht := d.d.Size()
		body["display"], body["width"], body["height"] = d.d.Name(), wd, ht
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}
