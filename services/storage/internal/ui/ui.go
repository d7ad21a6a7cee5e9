// Package ui is the trajectory viewer storage serves under /ui/: rollouts
// with their progress, one rollout's statistics, GRPO groups and filtered
// episodes, one episode's steps with the action drawn on each screenshot,
// and the comparison of two rollouts. Pages are rendered on the server with
// html/template (everything escaped); a small script of our own adds
// keyboard navigation, zoom and live refresh. Assets are embedded.
//
// Every page reads only what it shows: numbered pages through the index's
// rollout index, one page of steps, the groups of the episodes shown.
// Screenshots are served with immutable caching headers (they are
// content-addressed) and as thumbnails shrunk on the server and kept in a
// bounded LRU.
package ui

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Reads are the storage API's read paths the viewer uses (api.Server):
// they validate ids and answer gRPC statuses (NotFound for unknown ids).
type Reads interface {
	GetEpisode(ctx context.Context, req *pb.GetEpisodeRequest) (*pb.GetEpisodeResponse, error)
	GetStats(ctx context.Context, req *pb.GetStatsRequest) (*pb.GetStatsResponse, error)
	CompareRollouts(ctx context.Context, req *pb.CompareRolloutsRequest) (*pb.CompareRolloutsResponse, error)
	ReadBlob(ctx context.Context, sha string) (string, []byte, error)
}

// Index is the part of the index the viewer pages through.
type Index interface {
	ListEpisodes(ctx context.Context, f index.Filter, after *index.Cursor, limit int) ([]*pb.Episode, *index.Cursor, error)
	CountEpisodes(ctx context.Context, f index.Filter) (int64, error)
	CursorAt(ctx context.Context, f index.Filter, offset int64) (*index.Cursor, error)
	// Steps reads an episode whole for its OSWorld download, within the
	// export's byte bound (index.ErrTooLarge past it).
	Steps(ctx context.Context, episodeID string, maxBytes int64) ([]*pb.Step, error)
	StepIndexAt(ctx context.Context, episodeID string, offset int64) (int, error)
	StepRange(ctx context.Context, episodeID string, from, limit int) ([]*pb.Step, error)
	GroupMembers(ctx context.Context, rolloutID string, groups []string) ([]index.GroupMember, error)
	// Rollouts lists the stored rollouts, all of them with limit 0: the
	// viewer numbers its pages of them, and ListStoredRollouts pages by
	// token, an aggregation over every episode per page.
	Rollouts(ctx context.Context, after *index.RolloutCursor, limit int) ([]index.Rollout, *index.RolloutCursor, error)
}

// Options configure the viewer.
type Options struct {
	Reads Reads
	Index Index
	// AuthToken, when set, is required: as a bearer header, or as the
	// cookie the login form sets.
	AuthToken string
	// ThumbCacheBytes bounds the thumbnail cache; 0 means 64 MiB.
	ThumbCacheBytes int64
	Logger          *zap.Logger
	// Now is the clock (durations of running episodes); nil is time.Now.
	Now func() time.Time
	// Registerer receives the viewer's metrics (thumbnails served from
	// the cache and made); nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// Handler serves the viewer. Mount it at /ui/.
type Handler struct {
	reads  Reads
	idx    Index
	token  string
	cookie string // the cookie value that proves the token
	log    *zap.Logger
	now    func() time.Time
	tmpl   map[string]*template.Template
	static http.Handler
	thumbs *lru
	// decodes bounds the screenshots decoded for thumbnails at once.
	decodes slots
	// thumbsServed counts thumbnails served by where they came from:
	// "cache" (the LRU) or "made" (shrunk from the screenshot).
	thumbsServed *prometheus.CounterVec
	flight       singleflight.Group
	stats        statsCache
	mux          *http.ServeMux
	// sharedWait, set by tests, is called when a caller starts waiting
	// for shared work.
	sharedWait func(key string)
}

// New returns the viewer's handler.
func New(o Options) (*Handler, error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ThumbCacheBytes <= 0 {
		o.ThumbCacheBytes = 64 << 20
	}
	h := &Handler{reads: o.Reads, idx: o.Index, token: o.AuthToken, log: o.Logger, now: o.Now,
		thumbs: newLRU(o.ThumbCacheBytes), decodes: newSlots(maxThumbDecodes), tmpl: map[string]*template.Template{}, stats: statsCache{m: map[string]statsEntry{}},
		thumbsServed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rolloutmesh_storage_viewer_thumbnails_total",
			Help: "Screenshot thumbnails the viewer served, by source: cache (the server's LRU) or made (shrunk from the screenshot)."},
			[]string{"source"})}
	if o.Registerer != nil {
		if err := o.Registerer.Register(h.thumbsServed); err != nil {
			return nil, fmt.Errorf("register viewer metrics: %w", err)
		}
	}
	if o.AuthToken != "" {
		// The cookie holds a MAC of the token, not the token: a cookie
		// that leaks (a proxy log) does not give gRPC access.
		m := hmac.New(sha256.New, []byte(o.AuthToken))
		m.Write([]byte("rolloutmesh viewer session"))
		h.cookie = hex.EncodeToString(m.Sum(nil))
	}
	for _, page := range []string{"rollouts", "rollout", "episode", "compare", "error", "login"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		h.tmpl[page] = t
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	h.static = http.StripPrefix("/ui/static/", http.FileServerFS(static))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/{$}", h.rollouts)
	mux.HandleFunc("GET /ui/rollouts/{id}", h.rollout)
	mux.HandleFunc("GET /ui/episodes/{id}", h.episode)
	mux.HandleFunc("GET /ui/episodes/{id}/steps/{file}", h.stepJSON)
	mux.HandleFunc("GET /ui/episodes/{id}/osworld.tar", h.osworld)
	mux.HandleFunc("GET /ui/compare", h.compare)
	mux.HandleFunc("GET /ui/blobs/{sha}", h.blob)
	mux.HandleFunc("GET /ui/static/", h.serveStatic)
	mux.HandleFunc("GET /ui/login", h.loginForm)
	mux.HandleFunc("POST /ui/login", h.login)
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		h.notFound(w, r, "There is no page at this address.")
	})
	h.mux = mux
	return h, nil
}

const cookieName = "rolloutmesh_viewer"

// ServeHTTP checks the token, then serves the page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	if h.token != "" && !h.authorized(r) && !isLogin(r) && !strings.HasPrefix(r.URL.Path, "/ui/static/") {
		if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, ".json") && !strings.HasPrefix(r.URL.Path, "/ui/blobs/") {
			// The path comes back after the login; the token never goes
			// into a URL.
			http.Redirect(w, r, "/ui/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		http.Error(w, "unauthorized: the viewer needs the mesh's bearer token", http.StatusUnauthorized)
		return
	}
	h.mux.ServeHTTP(w, r)
}

func isLogin(r *http.Request) bool { return r.URL.Path == "/ui/login" }

func (h *Handler) authorized(r *http.Request) bool {
	if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return subtle.ConstantTimeCompare([]byte(auth), []byte(h.token)) == 1
	}
	c, err := r.Cookie(cookieName)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(h.cookie)) == 1
}

func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	// Assets change only with the binary; an hour keeps reloads cheap.
	w.Header().Set("Cache-Control", "public, max-age=3600")
	h.static.ServeHTTP(w, r)
}

type loginPage struct {
	pageBase
	Next, Error string
}

func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login", &loginPage{pageBase: pageBase{Title: "Sign in"}, Next: safeNext(r.URL.Query().Get("next"))})
}

// maxLoginBytes bounds the login form's body.
const maxLoginBytes = 8 << 10

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "login form: "+err.Error(), http.StatusBadRequest)
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if h.token == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(h.token)) != 1 {
		h.render(w, r, http.StatusUnauthorized, "login", &loginPage{pageBase: pageBase{Title: "Sign in"}, Next: next,
			Error: "That is not the mesh's token."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: h.cookie, Path: "/ui/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// safeNext keeps a redirect target inside the viewer.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

// pageBase is what the layout needs of every page.
type pageBase struct {
	Title string
	// Crumbs are links above the title.
	Crumbs []crumb
	// Live, when > 0, reloads the page's live parts every Live seconds.
	Live int
}

type crumb struct{ Href, Text string }

func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, page string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// Nothing inline runs: a script that slipped past escaping would not.
	w.Header().Set("Content-Security-Policy",
		"default-src 'self'; img-src 'self' data:; media-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	var buf strings.Builder
	if err := h.tmpl[page].Execute(&buf, data); err != nil {
		h.log.Error("render viewer page failed", zap.String("page", page), zap.Error(err))
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(code)
	_, _ = w.Write([]byte(buf.String()))
}

type errorPage struct {
	pageBase
	Code    int
	Message string
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request, msg string) {
	h.render(w, r, http.StatusNotFound, "error", &errorPage{pageBase: pageBase{Title: "Not found"}, Code: 404, Message: msg})
}

// fail answers an error from a read: NotFound and InvalidArgument (an id
// that cannot exist) are 404 pages; a read cancelled or out of time while
// the viewer still waits (shared work that failed) is a 503 page; the rest
// 500 and logged. A viewer that has gone gets nothing: nobody reads it.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	if r.Context().Err() != nil {
		return
	}
	switch code := status.Code(err); {
	case code == codes.NotFound || code == codes.InvalidArgument:
		h.notFound(w, r, "No "+what+" with this id is stored.")
		return
	case code == codes.Canceled || code == codes.DeadlineExceeded ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		h.log.Warn("viewer read interrupted", zap.String("what", what), zap.Error(err))
		w.Header().Set("Retry-After", "5")
		h.render(w, r, http.StatusServiceUnavailable, "error", &errorPage{pageBase: pageBase{Title: "Try again"}, Code: 503,
			Message: "Reading the " + what + " was interrupted or took too long; reload the page to try again."})
		return
	}
	h.log.Error("viewer read failed", zap.String("what", what), zap.Error(err))
	h.render(w, r, http.StatusInternalServerError, "error", &errorPage{pageBase: pageBase{Title: "Error"}, Code: 500,
		Message: "Reading the " + what + " failed; the storage log has the details."})
}
