package osworld

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/slides/pptx"
)

const (
	nsRels = "http://schemas.openxmlformats.org/package/2006/relationships"
	nsP    = "http://schemas.openxmlformats.org/presentationml/2006/main"
	nsA    = "http://schemas.openxmlformats.org/drawingml/2006/main"
	nsR    = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
)

// noSlide bounds a slide index: past it no package holds the slide (a
// package has at most 20,000 entries), so a larger index names none, as
// in OSWorld, and index+1 stays an int.
const noSlide = 1 << 30

// slideArgs reads ppt_file_path, slide_index (int() of it, as Python's int
// does: a number truncated, a numeric string, a boolean) and dest. An
// index names no slide when slide<index+1>.xml is not in the package,
// which is no error: OSWorld's getters answer None.
func slideArgs(getter string, cfg map[string]any) (ppt string, index int, dest string, err error) {
	ppt, dest = str(cfg, "ppt_file_path"), str(cfg, "dest")
	if ppt == "" || dest == "" {
		return "", 0, "", fmt.Errorf("%s: ppt_file_path and dest are required", getter)
	}
	switch v := cfg["slide_index"].(type) {
	case float64:
		// int() raises on NaN and the infinities.
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", 0, "", fmt.Errorf("%s: slide_index %v is not an integer int() reads", getter, v)
		}
		index = int(max(-noSlide, min(v, noSlide)))
	case bool:
		if v {
			index = 1
		}
	case string:
		n, err := metric.PyInt(v, 10)
		if err != nil {
			return "", 0, "", fmt.Errorf("%s: slide_index %q is not an integer int() reads", getter, v)
		}
		index = int(max(-noSlide, min(n, noSlide)))
	default:
		return "", 0, "", fmt.Errorf("%s: slide_index is required", getter)
	}
	return ppt, index, dest, nil
}

// openPresentation fetches the presentation as OSWorld does (vm_file with
// dest its base name) and opens its package, within pptx's size caps. A
// missing or broken file makes OSWorld's getter raise, so it is an error
// here too.
func (s *Session) openPresentation(ctx context.Context, getter, ppt string) (*pptx.Package, error) {
	v, err := s.vmFile(ctx, ppt, metric.PyBasename(ppt))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", getter, err)
	}
	local, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%s: the guest has no %s", getter, ppt)
	}
	pk, err := pptx.OpenPackage(local)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", getter, ppt, err)
	}
	return pk, nil
}

type relationship struct {
	ID, Type, Target string
	// noType: the Relationship has no Type, which the getters' rel.attrib
	// ["Type"] raises on.
	noType bool
}

// slideRels reads ppt/slides/_rels/slide<n>.xml.rels, its Relationship
// children in order, with their targets as written (the getters tell
// package parts from file:// URLs by them); ok is false when the part is
// absent.
func slideRels(pk *pptx.Package, n int) (rels []relationship, ok bool, err error) {
	name := "ppt/slides/_rels/slide" + strconv.Itoa(n) + ".xml.rels"
	if !pk.Has(name) {
		return nil, false, nil
	}
	root, err := pk.XML(name)
	if err != nil {
		return nil, false, err
	}
	// ElementTree's findall('r:Relationship') matches the namespaced name
	// only.
	for _, r := range root.ChildrenNamed(nsRels, "Relationship") {
		id, _ := r.Attr("", "Id")
		typ, hasType := r.Attr("", "Type")
		target, _ := r.Attr("", "Target")
		rels = append(rels, relationship{ID: id, Type: typ, Target: target, noType: !hasType})
	}
	return rels, true, nil
}

// extractRelated handles a relationship target as both slide getters do:
// a part of the package ("../media/x") is extracted next to the fetched
// presentation (cache/ppt/media/x) and its path returned; a file:// target
// is a guest file, fetched to cache/<dest> (nil when missing); anything
// else fails OSWorld's assert.
func (s *Session) extractRelated(ctx context.Context, pk *pptx.Package, target, dest string) (any, error) {
	if strings.HasPrefix(target, "..") {
		member := path.Clean(path.Join("ppt/slides", target))
		if !pk.Has(member) {
			return nil, fmt.Errorf("the presentation has no %s", member)
		}
		b, err := pk.Blob(member)
		if err != nil {
			return nil, err
		}
		if int64(len(b)) > s.maxDownload() {
			return nil, fmt.Errorf("%s: larger than %d bytes", member, s.maxDownload())
		}
		local, err := s.cachePath(member)
		if err != nil {
			return nil, err
		}
		if err := s.writeCache(member, b); err != nil {
			return nil, err
		}
		return local, nil
	}
	if !strings.HasPrefix(target, "file://") {
		return nil, fmt.Errorf("relationship target %q is neither a part of the package nor a file:// URL", target)
	}
	p := target[len("file://"):]
	v, err := s.vmFile(ctx, p, dest)
	if v == nil && err == nil {
		return noneBecause(ctx, "the guest has no file %s, which the slide links", p)
	}
	return v, err
}

// getAudioInSlide is audio_in_slide: the first audio of slide
// slide_index+1 (relationships whose Type contains "audio"), nil when it
// has none.
func getAudioInSlide(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	ppt, index, dest, err := slideArgs("audio_in_slide", cfg)
	if err != nil {
		return nil, err
	}
	pk, err := s.openPresentation(ctx, "audio_in_slide", ppt)
	if err != nil {
		return nil, err
	}
	rels, _, err := slideRels(pk, index+1)
	if err != nil {
		return nil, fmt.Errorf("audio_in_slide: %w", err)
	}
	for _, r := range rels {
		if r.noType {
			return nil, fmt.Errorf("audio_in_slide: a relationship of slide %d has no Type", index+1)
		}
		if strings.Contains(r.Type, "audio") {
			v, err := s.extractRelated(ctx, pk, r.Target, dest)
			if err != nil {
				return nil, fmt.Errorf("audio_in_slide: %w", err)
			}
			return v, nil
		}
	}
	if !pk.Has(slidePart(index + 1)) {
		return noneBecause(ctx, "%s has no slide %d", ppt, index+1)
	}
	return noneBecause(ctx, "slide %d of %s has no audio", index+1, ppt)
}

// slidePart is the package part of slide n.
func slidePart(n int) string { return "ppt/slides/slide" + strconv.Itoa(n) + ".xml" }

// getBackgroundImageInSlide is background_image_in_slide: the image of
// slide slide_index+1's background fill (the r:embed of the first a:blip
// under a p:bgPr), nil when the slide has none.
func getBackgroundImageInSlide(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	ppt, index, dest, err := slideArgs("background_image_in_slide", cfg)
	if err != nil {
		return nil, err
	}
	pk, err := s.openPresentation(ctx, "background_image_in_slide", ppt)
	if err != nil {
		return nil, err
	}
	slide := slidePart(index + 1)
	if !pk.Has(slide) {
		return noneBecause(ctx, "%s has no slide %d", ppt, index+1)
	}
	b, err := pk.Blob(slide)
	if err != nil {
		return nil, fmt.Errorf("background_image_in_slide: %w", err)
	}
	id, err := backgroundBlip(b)
	if err != nil {
		return nil, fmt.Errorf("background_image_in_slide: %s: %w", slide, err)
	}
	if id == "" {
		return noneBecause(ctx, "slide %d of %s has no background image", index+1, ppt)
	}
	rels, _, err := slideRels(pk, index+1)
	if err != nil {
		return nil, fmt.Errorf("background_image_in_slide: %w", err)
	}
	for _, r := range rels {
		if r.noType {
			return nil, fmt.Errorf("background_image_in_slide: a relationship of slide %d has no Type", index+1)
		}
		if strings.Contains(r.Type, "image") && r.ID == id {
			v, err := s.extractRelated(ctx, pk, r.Target, dest)
			if err != nil {
				return nil, fmt.Errorf("background_image_in_slide: %w", err)
			}
			return v, nil
		}
	}
	return noneBecause(ctx, "slide %d of %s has no image relationship %q, which its background names", index+1, ppt, id)
}

// backgroundBlip finds the relationship id of a slide's background image:
// for each p:bgPr in document order, its first a:blip; the first such blip
// with an r:embed wins ("" when none has one).
func backgroundBlip(slide []byte) (string, error) {
	d := xml.NewDecoder(strings.NewReader(string(slide)))
	depth, bgDepth := 0, 0 // bgDepth: depth of the p:bgPr being read, 0 outside
	seenBlip := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch {
			case bgDepth == 0 && t.Name.Space == nsP && t.Name.Local == "bgPr":
				bgDepth, seenBlip = depth, false
			case bgDepth > 0 && !seenBlip && t.Name.Space == nsA && t.Name.Local == "blip":
				seenBlip = true
				for _, a := range t.Attr {
					if a.Name.Space == nsR && a.Name.Local == "embed" {
						return a.Value, nil
					}
				}
			}
		case xml.EndElement:
			if depth == bgDepth {
				bgDepth = 0
			}
			depth--
		}
	}
}
