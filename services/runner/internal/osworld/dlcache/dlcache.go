// Package dlcache is the runners' shared store of files that OSWorld tasks
// download (setup download steps, cloud_file getters): one file per URL,
// fetched once and served from disk afterwards, so that repeated episodes
// and several runners on one host do not fetch the same file again, and so
// that a host without network can run tasks whose files were fetched or
// imported before (offline mode).
//
// Layout of Dir: <key> is the file, <key>.json its index record (URL,
// size, SHA-256 of the content, time), <key>.lock the lock that makes one
// writer download it; key is the hex SHA-256 of the URL. Files and records
// appear by atomic rename, so a reader sees a complete file or none.
package dlcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// Defaults of Cache's limits. A task names its URLs, so a broken or hostile
// task could otherwise point a download at an endless stream or a server
// that sends a byte a minute.
const (
	DefaultMaxSize = 1 << 30
	DefaultTimeout = 10 * time.Minute
	DefaultRetries = 3
	DefaultBackoff = time.Second
)

// maxRecord bounds an index record; a record is a few hundred bytes.
const maxRecord = 64 << 10

// ErrNotCached is returned in offline mode for a URL that is not in the
// cache.
var ErrNotCached = errors.New("not in the download cache (offline)")

// ErrTooLarge is returned when a file is larger than the cache's MaxSize.
var ErrTooLarge = errors.New("larger than the size cap")

// Cache is a download store in Dir. The zero values of the other fields
// take the defaults; a Cache may be shared by goroutines, and Dir by
// processes.
type Cache struct {
	Dir string
	// HTTP fetches the files; default a client without a timeout of its
	// own (Timeout bounds each download).
	HTTP *http.Client
	// MaxSize bounds one file.
	MaxSize int64
	// Timeout bounds one URL's download, all attempts and the body
	// included.
	Timeout time.Duration
	// Retries is how many attempts a download gets.
	Retries int
	// Backoff is the pause after the first failed attempt, doubled after
	// each further one.
	Backoff time.Duration
	// Offline fails every URL that is not cached, without network.
	Offline bool
	// Now stamps the index records; default time.Now.
	Now func() time.Time
}

// Entry is the index record of one cached URL.
type Entry struct {
	URL    string    `json:"url"`
	Size   int64     `json:"size"`
	SHA256 string    `json:"sha256"`
	Time   time.Time `json:"time"`
	// From says where the content came from: "download", or "import:" and
	// the imported file.
	From string `json:"from,omitempty"`
}

// Key is the name under which url is stored.
func Key(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:])
}

func (c *Cache) maxSize() int64 {
	if c.MaxSize > 0 {
		return c.MaxSize
	}
	return DefaultMaxSize
}

func (c *Cache) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *Cache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Path is where url's content is stored, whether or not it is there.
func (c *Cache) Path(url string) string { return filepath.Join(c.Dir, Key(url)) }

// Lookup returns the stored file and its record when url is cached.
func (c *Cache) Lookup(url string) (string, Entry, bool) {
	p := c.Path(url)
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() {
		return "", Entry{}, false
	}
	e, err := c.record(url)
	if err != nil || e.URL != url || e.Size != st.Size() {
		// A file without a matching record is not trusted: the record is
		// written after the file, so this is a writer that died between the
		// two or a hand-edited store; the next Get replaces it.
		return "", Entry{}, false
	}
	return p, e, true
}

func (c *Cache) record(url string) (Entry, error) {
	b, err := boundedread.ReadFile(c.Path(url)+".json", maxRecord)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("index record of %s: %v", url, err)
	}
	return e, nil
}

// Entries lists the index records of the store (unordered); unreadable
// records are skipped.
func (c *Cache) Entries() ([]Entry, error) {
	names, err := filepath.Glob(filepath.Join(c.Dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, n := range names {
		b, err := boundedread.ReadFile(n, maxRecord)
		if err != nil {
			continue
		}
		var e Entry
		if json.Unmarshal(b, &e) == nil && e.URL != "" {
			out = append(out, e)
		}
	}
	return out, nil
}

// Get returns the local path of url's content, downloading it first when
// it is not cached (once: concurrent callers, in this process or another
// sharing Dir, wait for the one download). The returned file must not be
// written to.
func (c *Cache) Get(ctx context.Context, url string) (string, error) {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return "", fmt.Errorf("download %s: only http and https URLs are fetched", url)
	}
	if c.Dir == "" {
		return "", fmt.Errorf("download %s: the download cache has no directory", url)
	}
	if p, _, ok := c.Lookup(url); ok {
		return p, nil
	}
	if c.Offline {
		return "", fmt.Errorf("download %s: %w", url, ErrNotCached)
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", fmt.Errorf("download cache: %w", err)
	}
	unlock, err := c.lock(ctx, url)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", url, err)
	}
	defer unlock()
	// Whoever held the lock before may have stored it.
	if p, _, ok := c.Lookup(url); ok {
		return p, nil
	}
	if err := c.download(ctx, url); err != nil {
		return "", err
	}
	return c.Path(url), nil
}

// lock takes the per-URL lock file. flock locks belong to the open file,
// so it excludes other goroutines of this process as well as other
// processes; it is polled so that ctx can end the wait.
func (c *Cache) lock(ctx context.Context, url string) (func(), error) {
	f, err := os.OpenFile(c.Path(url)+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	wait := 10 * time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock: %w", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("waiting for another download of it: %w", ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// permanent marks an attempt's error that a retry would not change.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// download fetches url into the store; the caller holds url's lock.
func (c *Cache) download(ctx context.Context, url string) error {
	timeout := c.timeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tries := c.Retries
	if tries <= 0 {
		tries = DefaultRetries
	}
	backoff := c.Backoff
	if backoff <= 0 {
		backoff = DefaultBackoff
	}
	var err error
	for try := 0; try < tries; try++ {
		if try > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("download %s: %v; then not done within %s: %w", url, err, timeout, ctx.Err())
			case <-t.C:
			}
			backoff *= 2
		}
		err = c.attempt(ctx, url)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("download %s: not done within %s: %w", url, timeout, ctx.Err())
		}
		var p permanent
		if errors.As(err, &p) {
			return fmt.Errorf("download %s: %w", url, p.err)
		}
	}
	return fmt.Errorf("download %s: %d attempts failed, the last: %w", url, tries, err)
}

func (c *Cache) attempt(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return permanent{err}
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("HTTP %s", resp.Status)
		// Client errors other than a timeout or a rate limit will not
		// change on a second try.
		if resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
			return permanent{err}
		}
		return err
	}
	limit := c.maxSize()
	if resp.ContentLength > limit {
		return permanent{fmt.Errorf("%w: %d bytes announced, the cap is %d", ErrTooLarge, resp.ContentLength, limit)}
	}
	return c.store(url, resp.Body, "download")
}

// store writes r as url's content and record, atomically: a temporary file
// in Dir renamed into place, then the record the same way. The caller
// holds url's lock.
func (c *Cache) store(url string, r io.Reader, from string) error {
	limit := c.maxSize()
	tmp, err := os.CreateTemp(c.Dir, ".part-*")
	if err != nil {
		return permanent{err}
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n > limit {
		return permanent{fmt.Errorf("%w of %d bytes", ErrTooLarge, limit)}
	}
	// Read-only, as callers get the stored file itself.
	if err := os.Chmod(tmp.Name(), 0o444); err != nil {
		return permanent{err}
	}
	p := c.Path(url)
	if err := os.Rename(tmp.Name(), p); err != nil {
		return permanent{err}
	}
	e := Entry{URL: url, Size: n, SHA256: sum(h), Time: c.now().UTC(), From: from}
	if err := c.writeRecord(e); err != nil {
		os.Remove(p)
		return permanent{err}
	}
	return nil
}

func sum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

func (c *Cache) writeRecord(e Entry) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.Dir, ".rec-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), c.Path(e.URL)+".json")
}

// Put stores the local file src as url's content unless url is cached
// already; it reports whether it stored it. Used by Import, and by whoever
// has a file from elsewhere (a mirror).
func (c *Cache) Put(ctx context.Context, url, src string) (bool, error) {
	if c.Dir == "" {
		return false, fmt.Errorf("put %s: the download cache has no directory", url)
	}
	if _, _, ok := c.Lookup(url); ok {
		return false, nil
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return false, fmt.Errorf("download cache: %w", err)
	}
	unlock, err := c.lock(ctx, url)
	if err != nil {
		return false, fmt.Errorf("put %s: %w", url, err)
	}
	defer unlock()
	if _, _, ok := c.Lookup(url); ok {
		return false, nil
	}
	f, err := boundedread.Open(src)
	if err != nil {
		return false, fmt.Errorf("put %s: %w", url, err)
	}
	defer f.Close()
	if err := c.store(url, f, "import:"+src); err != nil {
		return false, fmt.Errorf("put %s from %s: %w", url, src, err)
	}
	return true, nil
}
