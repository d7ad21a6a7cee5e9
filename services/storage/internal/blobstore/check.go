package blobstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// PackProblem is damage to a pack file, or to the index's view of it, that
// CheckPacks found without reading blob content.
type PackProblem struct {
	// Pack is the pack's file name (or the malformed location).
	Pack string `json:"pack"`
	// Path is the pack's path, empty for a malformed location.
	Path string `json:"path,omitempty"`
	// Problem says what is wrong.
	Problem string `json:"problem"`
	// Blobs counts the stored blobs the problem affects.
	Blobs int `json:"blobs"`
}

// CheckPacks compares every pack the index names with the blobs the index
// places in it: a pack that is missing, is not a regular file, or ends
// before its last blob does has lost blobs; two blobs sharing bytes, or a
// location this store never hands out, mean the index is damaged. each
// calls its argument with the location and size of every stored blob, as
// for Reclaim. It reads no blob content (a stat per pack), so it is cheap
// enough to run at every start; fsck reads the content too.
func (f *Files) CheckPacks(ctx context.Context, each func(fn func(loc string, size int64) error) error) ([]PackProblem, error) {
	spans := map[uint64][][2]int64{}
	var problems []PackProblem
	err := each(func(loc string, size int64) error {
		if loc == "" {
			return nil
		}
		id, off, err := parseLoc(loc)
		if err != nil || size < 0 {
			problems = append(problems, PackProblem{Pack: loc, Problem: "malformed blob location or size in the index", Blobs: 1})
			return nil
		}
		spans[id] = append(spans[id], [2]int64{off, off + size})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list stored blobs: %w", err)
	}
	ids := make([]uint64, 0, len(spans))
	for id := range spans {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return problems, err
		}
		if p, ok := f.checkPack(id, spans[id]); ok {
			problems = append(problems, p)
		}
	}
	return problems, nil
}

// checkPack checks one pack against the spans of its blobs.
func (f *Files) checkPack(id uint64, spans [][2]int64) (PackProblem, bool) {
	name := packName(id)
	p := PackProblem{Pack: name, Path: filepath.Join(f.packs, name)}
	st, err := os.Lstat(p.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.Problem, p.Blobs = "missing", len(spans)
		return p, true
	case err != nil:
		p.Problem, p.Blobs = err.Error(), len(spans)
		return p, true
	case !st.Mode().IsRegular():
		p.Problem, p.Blobs = "not a regular file", len(spans)
		return p, true
	}
	slices.SortFunc(spans, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var cut, overlaps int
	var end int64
	for i, sp := range spans {
		if sp[1] > st.Size() {
			cut++
		}
		// Blobs start on block boundaries and never share a block.
		if i > 0 && sp[0] < alignUp(end) {
			overlaps++
		}
		end = max(end, sp[1])
	}
	switch {
	case cut > 0:
		p.Problem = fmt.Sprintf("truncated: %d bytes, the index has blobs up to byte %d", st.Size(), end)
		p.Blobs = cut
		return p, true
	case overlaps > 0:
		p.Problem = "the index places blobs over each other's bytes"
		p.Blobs = overlaps
		return p, true
	}
	return p, false
}
