package osworld

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// TestFetchLimits points downloads at sources that never end, never come
// or are too large: each fails promptly, and nothing lands in the cache.
func TestFetchLimits(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 4096)))
	}))
	defer big.Close()
	stop := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for {
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	defer slow.Close()
	defer close(stop)

	tests := []struct {
		name    string
		url     string
		wantErr error
	}{
		{name: "fifo", url: "file://" + fifo, wantErr: boundedread.ErrNotRegular},
		{name: "device", url: "/dev/zero", wantErr: boundedread.ErrNotRegular},
		{name: "larger than the cap", url: big.URL + "/big"},
		{name: "a byte every 50ms", url: slow.URL + "/slow", wantErr: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Session{CacheDir: t.TempDir(), MaxDownload: 1024, DownloadTimeout: 500 * time.Millisecond}
			local := filepath.Join(s.CacheDir, "f")
			start := time.Now()
			err := s.fetch(context.Background(), tt.url, local)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("fetch(%s) = %v, want an error wrapping %v", tt.url, err, tt.wantErr)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("fetch(%s) took %s", tt.url, d)
			}
			if got, _ := filepath.Glob(filepath.Join(s.CacheDir, "*")); len(got) != 0 {
				t.Errorf("fetch(%s) left %v in the cache", tt.url, got)
			}
		})
	}
}

func TestReadLocalRefusesDevices(t *testing.T) {
	if _, _, err := metric.ReadText("/dev/zero"); !errors.Is(err, boundedread.ErrNotRegular) {
		t.Errorf("ReadText(/dev/zero) = %v, want ErrNotRegular", err)
	}
}

func TestUploadFileRefusesDevices(t *testing.T) {
	s := &Session{CacheDir: t.TempDir()}
	err := stepUploadFile(context.Background(), s, map[string]any{"files": []any{map[string]any{"local_path": "/dev/zero", "path": "/tmp/x"}}})
	if !errors.Is(err, boundedread.ErrNotRegular) {
		t.Errorf("upload_file of /dev/zero = %v, want ErrNotRegular", err)
	}
}
