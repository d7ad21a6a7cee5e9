package docx

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// Bounds of one package. A zip entry's declared size cannot be trusted (a
// zip bomb lies about it), so every read is capped as it decompresses.
// python-docx reads any size: the errors for a package past them wrap
// boundedread.ErrTooLarge or metric.ErrOverCap, and are not scored.
const (
	// MaxFile bounds the package file itself.
	MaxFile = 256 << 20
	// maxPart bounds one decompressed entry.
	maxPart = 64 << 20
	// maxTotal bounds all entries read from one package.
	maxTotal = 256 << 20
	// maxEntries bounds the zip directory.
	maxEntries = 10000
)

// errMissing marks a part that the package does not have.
var errMissing = errors.New("part missing")

// pkg is an opened zip package whose reads share one budget.
type pkg struct {
	zr     *zip.Reader
	byName map[string]*zip.File
	read   int64
	// lxml keeps comments in parsed parts, as python-docx's parser does.
	lxml bool
}

// openPkg opens a zip package held in memory.
func openPkg(data []byte) (*pkg, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("open zip: %w", err)
	}
	if len(zr.File) > maxEntries {
		return nil, fmt.Errorf("open zip: over %d entries: %w", maxEntries, metric.ErrOverCap)
	}
	p := &pkg{zr: zr, byName: make(map[string]*zip.File, len(zr.File))}
	for _, f := range zr.File {
		if _, dup := p.byName[f.Name]; !dup {
			p.byName[f.Name] = f
		}
	}
	return p, nil
}

// readFile reads a package file from disk, capped at MaxFile.
func readFile(path string) ([]byte, error) {
	return boundedread.ReadFile(path, MaxFile)
}

// has reports whether the package has the entry name.
func (p *pkg) has(name string) bool {
	_, ok := p.byName[name]
	return ok
}

// part reads the entry name, within the per-part and per-package budgets.
func (p *pkg) part(name string) ([]byte, error) {
	f, ok := p.byName[name]
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, errMissing)
	}
	budget := min(int64(maxPart), maxTotal-p.read)
	if budget > 0 && f.UncompressedSize64 > uint64(budget) {
		// Over the cap if the part holds what its header says; a header
		// that lies is a corrupt package.
		if err := metric.ZipEntryOverCap(f, budget); !errors.Is(err, metric.ErrOverCap) {
			return nil, err
		}
	}
	if budget <= 0 || f.UncompressedSize64 > uint64(budget) {
		return nil, fmt.Errorf("%s: over the cap of %d bytes a part and %d a package: %w: %w",
			name, maxPart, maxTotal, boundedread.ErrTooLarge, metric.ErrOverCap)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer rc.Close()
	b, err := boundedread.ReadAll(rc, budget)
	p.read += int64(len(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b, nil
}

// xmlPart reads and parses the entry name.
func (p *pkg) xmlPart(name string) (*node, error) {
	b, err := p.part(name)
	if err != nil {
		return nil, err
	}
	n, err := parseXML(b, p.lxml)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}
