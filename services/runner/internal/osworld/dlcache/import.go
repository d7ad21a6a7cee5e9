package dlcache

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Source is one file an OSWorld cache folder may hold: OSWorld keeps task
// files in cache/<task_id>/<name>, and only the task says which URL a name
// came from.
type Source struct {
	TaskID string
	Name   string
	URL    string
}

// ImportResult says what Import did.
type ImportResult struct {
	// Imported are the URLs stored now; Present were cached already.
	Imported, Present []string
	// Absent are the sources whose file the folder does not hold.
	Absent []Source
}

// Import stores the files of an OSWorld cache folder dir
// (dir/<task_id>/<name>) under the URLs that sources give them, so that
// a host which ran OSWorld can run its tasks offline. A file that is not
// there is listed in Absent, not an error; an unreadable or oversized one
// is.
func (c *Cache) Import(ctx context.Context, dir string, sources []Source) (ImportResult, error) {
	var res ImportResult
	for _, s := range sources {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if s.URL == "" || !local(s.TaskID) || !local(s.Name) {
			return res, fmt.Errorf("import: bad source %+v: task id and name must be plain file names", s)
		}
		p := filepath.Join(dir, s.TaskID, s.Name)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			res.Absent = append(res.Absent, s)
			continue
		}
		stored, err := c.Put(ctx, s.URL, p)
		if err != nil {
			return res, fmt.Errorf("import: %w", err)
		}
		if stored {
			res.Imported = append(res.Imported, s.URL)
		} else {
			res.Present = append(res.Present, s.URL)
		}
	}
	return res, nil
}

// local reports whether name is one path element, so a source cannot read
// outside the folder.
func local(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name
}

// UUID5URL is Python's str(uuid.uuid5(uuid.NAMESPACE_URL, url)), the prefix
// OSWorld gives a download step's cache file
// (cache/<task_id>/<uuid5>_<basename of the guest path>).
func UUID5URL(url string) string {
	// NAMESPACE_URL, 6ba7b811-9dad-11d1-80b4-00c04fd430c8 (RFC 9562).
	ns := []byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	h := sha1.New()
	h.Write(ns)
	h.Write([]byte(url))
	u := h.Sum(nil)[:16]
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
