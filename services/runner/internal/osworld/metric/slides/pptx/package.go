package pptx

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// Size caps. A pptx is a zip: a few kilobytes of deflated XML can expand to
// gigabytes, and the declared sizes in its headers may lie, so every entry
// is read through a limit and the whole package has a budget.
const (
	MaxFile      = 64 << 20  // the pptx file itself
	MaxPart      = 32 << 20  // one uncompressed entry
	MaxExpanded  = 256 << 20 // all entries read from one package
	maxEntries   = 20000
	maxRelations = 20000
)

// ErrTooLarge is wrapped by the errors for input over a cap. python-pptx
// reads any size, so it wraps metric.ErrOverCap: such a file is not
// scored.
var ErrTooLarge = fmt.Errorf("over the size cap: %w", metric.ErrOverCap)

// Package is an open OPC package (the zip under a pptx).
type Package struct {
	files  map[string]*zip.File
	budget int64 // bytes still to inflate
	elems  int   // elements still to parse
	parts  map[string]*Element
	types  map[string]string // content types of the loaded parts
	rels   map[string][]Rel
}

// Rel is one relationship of a part.
type Rel struct {
	ID, Type, Target string // Target is resolved to a part name unless External
	External         bool
}

// OpenPackage reads the file at path (capped at MaxFile) as a package.
func OpenPackage(p string) (*Package, error) {
	data, err := boundedread.ReadFile(p, MaxFile)
	if errors.Is(err, boundedread.ErrTooLarge) {
		return nil, fmt.Errorf("read pptx: %v: %w", err, ErrTooLarge)
	}
	if err != nil {
		return nil, fmt.Errorf("read pptx: %w", err)
	}
	return ReadPackage(data)
}

// ReadPackage reads a package from memory.
func ReadPackage(data []byte) (*Package, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("open pptx zip: %w", err)
	}
	if len(zr.File) > maxEntries {
		return nil, fmt.Errorf("open pptx zip: more than %d entries: %w", maxEntries, ErrTooLarge)
	}
	pk := &Package{files: map[string]*zip.File{}, budget: MaxExpanded, elems: maxPackageElements, parts: map[string]*Element{}, rels: map[string][]Rel{}}
	for _, f := range zr.File {
		if _, dup := pk.files[f.Name]; !dup {
			pk.files[f.Name] = f
		}
	}
	return pk, nil
}

// Has reports whether the package has an entry name.
func (pk *Package) Has(name string) bool {
	_, ok := pk.files[name]
	return ok
}

// Blob returns an entry's bytes, within the caps.
func (pk *Package) Blob(name string) ([]byte, error) {
	f, ok := pk.files[name]
	if !ok {
		return nil, fmt.Errorf("pptx: no part %q", name)
	}
	limit := min(int64(MaxPart), pk.budget)
	if f.UncompressedSize64 > uint64(limit) {
		// Over the cap if the part holds what its header says; a header
		// that lies is a corrupt package.
		err := metric.ZipEntryOverCap(f, limit)
		if errors.Is(err, metric.ErrOverCap) {
			return nil, fmt.Errorf("pptx: part %q inflates past the cap of %d bytes a part and %d a package: %w",
				name, MaxPart, MaxExpanded, ErrTooLarge)
		}
		return nil, fmt.Errorf("pptx: part %q: %w", name, err)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("pptx: part %q: %w", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("pptx: part %q: %w", name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("pptx: part %q inflates past the cap of %d bytes a part and %d a package: %w",
			name, MaxPart, MaxExpanded, ErrTooLarge)
	}
	pk.budget -= int64(len(b))
	return b, nil
}

// XML returns an entry parsed (once) as XML.
func (pk *Package) XML(name string) (*Element, error) {
	if e, ok := pk.parts[name]; ok {
		return e, nil
	}
	b, err := pk.Blob(name)
	if err != nil {
		return nil, err
	}
	e, n, err := parseXML(b, min(maxElements, pk.elems))
	if err != nil {
		return nil, fmt.Errorf("pptx: part %q: %w", name, err)
	}
	pk.elems -= n
	pk.parts[name] = e
	return e, nil
}

// relsName is the relationships entry of a part ("" for the package).
func relsName(part string) string {
	dir, file := path.Split(part)
	return dir + "_rels/" + file + ".rels"
}

// Rels returns a part's relationships ("" for the package's own), none
// when it has no relationships entry.
func (pk *Package) Rels(part string) ([]Rel, error) {
	if r, ok := pk.rels[part]; ok {
		return r, nil
	}
	name := relsName(part)
	var out []Rel
	if pk.Has(name) {
		root, err := pk.XML(name)
		if err != nil {
			return nil, err
		}
		for _, c := range root.ChildrenNamed(nsRel, "Relationship") {
			if len(out) >= maxRelations {
				return nil, fmt.Errorf("pptx: %q has more than %d relationships: %w", name, maxRelations, ErrTooLarge)
			}
			id, _ := c.Attr("", "Id")
			typ, _ := c.Attr("", "Type")
			target, _ := c.Attr("", "Target")
			mode, _ := c.Attr("", "TargetMode")
			r := Rel{ID: id, Type: typ, Target: target, External: mode == "External"}
			if !r.External {
				r.Target = resolve(part, target)
			}
			out = append(out, r)
		}
	}
	pk.rels[part] = out
	return out, nil
}

// resolve turns a relationship target into a part name, relative to the
// source part's directory as python-pptx's PackURI.from_rel_ref does.
func resolve(source, target string) string {
	if strings.HasPrefix(target, "/") {
		return strings.TrimPrefix(path.Clean(target), "/")
	}
	base := path.Dir(source)
	if source == "" {
		base = ""
	}
	return strings.TrimPrefix(path.Clean("/"+path.Join(base, target)), "/")
}

// Related returns the target part of the relationship rID of part.
func (pk *Package) Related(part, rID string) (string, error) {
	rels, err := pk.Rels(part)
	if err != nil {
		return "", err
	}
	for _, r := range rels {
		if r.ID == rID && !r.External {
			return r.Target, nil
		}
	}
	return "", fmt.Errorf("pptx: %q has no relationship %q", part, rID)
}

// RelatedByType returns the target of part's first relationship whose type
// ends with /suffix, and whether there is one.
func (pk *Package) RelatedByType(part, suffix string) (string, bool, error) {
	rels, err := pk.Rels(part)
	if err != nil {
		return "", false, err
	}
	for _, r := range rels {
		if !r.External && strings.HasSuffix(r.Type, "/"+suffix) {
			return r.Target, true, nil
		}
	}
	return "", false, nil
}
