package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/api"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/blobstore"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/ui"
)

// gatedReads is the real storage API with the shared reads (GetStats,
// ReadBlob) held until the test releases them. Once released they answer
// err when it is set, else what the API answers on the context they got.
type gatedReads struct {
	ui.Reads
	entered chan struct{}
	release chan struct{}
	err     error
	// ctxErr and hasDeadline are the shared read's context at release.
	ctxErr      error
	hasDeadline bool
}

func (g *gatedReads) hold(ctx context.Context) error {
	g.entered <- struct{}{}
	<-g.release
	g.ctxErr = ctx.Err()
	_, g.hasDeadline = ctx.Deadline()
	return g.err
}

func (g *gatedReads) GetStats(ctx context.Context, req *pb.GetStatsRequest) (*pb.GetStatsResponse, error) {
	if err := g.hold(ctx); err != nil {
		return nil, err
	}
	return g.Reads.GetStats(ctx, req)
}

func (g *gatedReads) ReadBlob(ctx context.Context, sha string) (string, []byte, error) {
	if err := g.hold(ctx); err != nil {
		return "", nil, err
	}
	return g.Reads.ReadBlob(ctx, sha)
}

// oneEpisodeStore is a real storage's index and blobs holding one episode
// of one step (ep-one of rollout r-base), opened for a handler of the
// test's own.
func oneEpisodeStore(t *testing.T) (*index.DB, *blobstore.Files) {
	t.Helper()
	v := startViewer(t, "")
	v.write(t, epSpec{"r-base", "ep-one", "g-one", "t-one", "os", done, 1, "", 1, "", 0})
	idx, err := index.Open(context.Background(), filepath.Join(v.dataDir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	blobs, err := blobstore.NewFiles(filepath.Join(v.dataDir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return idx, blobs
}

// gatedViewer is a viewer over a real storage's data (one episode of one
// step, of rollout r-base) whose shared reads wait for the test, and whose
// callers report when they start waiting for shared work.
func gatedViewer(t *testing.T, sharedErr error) (*ui.Handler, *gatedReads, chan string) {
	t.Helper()
	idx, blobs := oneEpisodeStore(t)
	g := &gatedReads{Reads: api.New(idx, blobs, nil, api.Options{SuccessThreshold: 1}),
		entered: make(chan struct{}), release: make(chan struct{}), err: sharedErr}
	h, err := ui.New(ui.Options{Reads: g, Index: idx})
	if err != nil {
		t.Fatal(err)
	}
	waits := make(chan string, 8)
	ui.SetSharedWait(h, func(key string) { waits <- key })
	return h, g, waits
}

// serve runs one request on h in the background.
func serve(ctx context.Context, h http.Handler, path string) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx))
		out <- rec
	}()
	return out
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// The pages whose reads are shared between viewers: a rollout page (its
// statistics) and a thumbnail.
var sharedPages = []struct {
	name, path string
	ok         func(rec *httptest.ResponseRecorder) bool
}{
	{"rollout statistics", "/ui/rollouts/r-base", func(rec *httptest.ResponseRecorder) bool {
		return strings.Contains(rec.Body.String(), `data-episode="ep-one"`)
	}},
	{"thumbnail", "", func(rec *httptest.ResponseRecorder) bool {
		return rec.Header().Get("Content-Type") == "image/jpeg" && rec.Body.Len() > 0
	}},
}

// TestSharedReadOutlivesFirstViewer: the first viewer of a rollout (or of
// a thumbnail) starts the shared read and goes away; a second viewer that
// joined that read still gets the real page, and the first gets nothing.
func TestSharedReadOutlivesFirstViewer(t *testing.T) {
	for _, tc := range sharedPages {
		t.Run(tc.name, func(t *testing.T) {
			h, g, waits := gatedViewer(t, nil)
			path := tc.path
			if path == "" {
				path = "/ui/blobs/" + shaOf(screenshot(t, 0)) + "?scale=2"
			}
			first, leave := context.WithCancel(context.Background())
			defer leave()
			a := serve(first, h, path)
			recv(t, g.entered, "the first viewer's shared read")
			recv(t, waits, "the first viewer to wait")
			b := serve(context.Background(), h, path)
			// The read is still held, so the second viewer joined it.
			recv(t, waits, "the second viewer to join")
			leave()
			if rec := recv(t, a, "the first viewer's answer"); rec.Body.Len() != 0 {
				t.Errorf("the viewer that left got %d bytes (status %d), want nothing", rec.Body.Len(), rec.Code)
			}
			close(g.release)
			rec := recv(t, b, "the second viewer's answer")
			if rec.Code != http.StatusOK || !tc.ok(rec) {
				t.Errorf("second viewer: %d, %d bytes, want 200 and the real page:\n%.300s", rec.Code, rec.Body.Len(), rec.Body.String())
			}
			if g.ctxErr != nil || !g.hasDeadline {
				t.Errorf("shared read's context: err %v, deadline %v; want live with a deadline of its own", g.ctxErr, g.hasDeadline)
			}
			// Kept even though the viewer that started it left: the next
			// viewer is answered without a read (the gate would block it).
			rec = recv(t, serve(context.Background(), h, path), "a third viewer's answer")
			if rec.Code != http.StatusOK || !tc.ok(rec) {
				t.Errorf("third viewer: %d, want 200 from the cache", rec.Code)
			}
		})
	}
}

// TestSharedReadFailureIsAnErrorPage: when the shared read fails, every
// viewer waiting on it gets an error page, never an empty 200; a read
// cancelled or timed out under a viewer still waiting is a 503 to retry.
func TestSharedReadFailureIsAnErrorPage(t *testing.T) {
	for _, e := range []struct {
		err  error
		code int
	}{
		{status.Error(codes.Internal, "disk on fire"), http.StatusInternalServerError},
		{status.Error(codes.Canceled, "context canceled"), http.StatusServiceUnavailable},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), http.StatusServiceUnavailable},
		{context.DeadlineExceeded, http.StatusServiceUnavailable},
	} {
		for _, tc := range sharedPages {
			t.Run(tc.name+"/"+e.err.Error(), func(t *testing.T) {
				h, g, waits := gatedViewer(t, e.err)
				path := tc.path
				if path == "" {
					path = "/ui/blobs/" + shaOf(screenshot(t, 0)) + "?scale=2"
				}
				a := serve(context.Background(), h, path)
				recv(t, g.entered, "the shared read")
				recv(t, waits, "the first viewer to wait")
				b := serve(context.Background(), h, path)
				recv(t, waits, "the second viewer to join")
				close(g.release)
				for i, ch := range []<-chan *httptest.ResponseRecorder{a, b} {
					rec := recv(t, ch, "an answer")
					if rec.Code != e.code || !strings.Contains(rec.Body.String(), `id="error-code">`) {
						t.Errorf("viewer %d: %d, body %.200q; want %d and the error page", i+1, rec.Code, rec.Body.String(), e.code)
					}
				}
			})
		}
	}
}
