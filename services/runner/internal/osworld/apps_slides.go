package osworld

import (
	"archive/zip"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// Limits on what the slide getters read from a presentation: its XML parts
// are small, and a media file larger than a download is not plausible.
const maxSlidePart = 32 << 20

const (
	nsRels = "http://schemas.openxmlformats.org/package/2006/relationships"
	nsP    = "http://schemas.openxmlformats.org/presentationml/2006/main"
	nsA    = "http://schemas.openxmlformats.org/drawingml/2006/main"
	nsR    = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
)

// slideArgs reads ppt_file_path, slide_index (int() of a number or a
// numeric string, as Python's int does) and dest.
func slideArgs(getter string, cfg map[string]any) (ppt string, index int, dest string, err error) {
	ppt, dest = str(cfg, "ppt_file_path"), str(cfg, "dest")
	if ppt == "" || dest == "" {
		return "", 0, "", fmt.Errorf("%s: ppt_file_path and dest are required", getter)
	}
	switch v := cfg["slide_index"].(type) {
	case float64:
		index = int(v)
	case string:
		if index, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
			return "", 0, "", fmt.Errorf("%s: slide_index %q is not an integer", getter, v)
		}
	default:
		return "", 0, "", fmt.Errorf("%s: slide_index is required", getter)
	}
	if index < 0 || index > 1<<16 {
		return "", 0, "", fmt.Errorf("%s: slide_index %d is out of range", getter, index)
	}
	return ppt, index, dest, nil
}

// openPresentation fetches the presentation as OSWorld does (vm_file with
// dest its base name) and opens it as a zip. A missing or broken file makes
// OSWorld's getter raise, so it is an error here too.
func (s *Session) openPresentation(ctx context.Context, getter, ppt string) (*zip.ReadCloser, error) {
	v, err := s.vmFile(ctx, ppt, pyBasename(ppt))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", getter, err)
	}
	local, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%s: the guest has no %s", getter, ppt)
	}
	z, err := zip.OpenReader(local)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", getter, ppt, err)
	}
	return z, nil
}

func zipMember(z *zip.ReadCloser, name string) *zip.File {
	for _, f := range z.File {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// readMember reads a zip member of at most limit bytes, trusting neither
// the size the archive declares nor the compressed stream (zip bombs).
func readMember(f *zip.File, limit int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("%s: larger than %d bytes", f.Name, limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", f.Name, limit)
	}
	return b, nil
}

type relationship struct {
	ID, Type, Target string
}

// slideRels reads ppt/slides/_rels/slide<n>.xml.rels, its Relationship
// children in order; ok is false when the part is absent.
func slideRels(z *zip.ReadCloser, n int) (rels []relationship, ok bool, err error) {
	f := zipMember(z, "ppt/slides/_rels/slide"+strconv.Itoa(n)+".xml.rels")
	if f == nil {
		return nil, false, nil
	}
	b, err := readMember(f, maxSlidePart)
	if err != nil {
		return nil, false, err
	}
	var doc struct {
		XMLName xml.Name `xml:"Relationships"`
		Rels    []struct {
			XMLName xml.Name `xml:"Relationship"`
			ID      string   `xml:"Id,attr"`
			Type    string   `xml:"Type,attr"`
			Target  string   `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, false, fmt.Errorf("%s: %w", f.Name, err)
	}
	for _, r := range doc.Rels {
		// ElementTree's findall('r:Relationship') matches the namespaced
		// name only.
		if r.XMLName.Space == nsRels {
			rels = append(rels, relationship{ID: r.ID, Type: r.Type, Target: r.Target})
		}
	}
	return rels, true, nil
}

// extractRelated handles a relationship target as both slide getters do:
// a part of the package ("../media/x") is extracted next to the fetched
// presentation (cache/ppt/media/x) and its path returned; a file:// target
// is a guest file, fetched to cache/<dest> (nil when missing); anything
// else fails OSWorld's assert.
func (s *Session) extractRelated(ctx context.Context, z *zip.ReadCloser, target, dest string) (any, error) {
	if strings.HasPrefix(target, "..") {
		member := path.Clean(path.Join("ppt/slides", target))
		f := zipMember(z, member)
		if f == nil {
			return nil, fmt.Errorf("the presentation has no %s", member)
		}
		b, err := readMember(f, s.maxDownload())
		if err != nil {
			return nil, err
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
	return s.vmFile(ctx, target[len("file://"):], dest)
}

// getAudioInSlide is audio_in_slide: the first audio of slide
// slide_index+1 (relationships whose Type contains "audio"), nil when it
// has none.
func getAudioInSlide(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	ppt, index, dest, err := slideArgs("audio_in_slide", cfg)
	if err != nil {
		return nil, err
	}
	z, err := s.openPresentation(ctx, "audio_in_slide", ppt)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	rels, _, err := slideRels(z, index+1)
	if err != nil {
		return nil, fmt.Errorf("audio_in_slide: %w", err)
	}
	for _, r := range rels {
		if strings.Contains(r.Type, "audio") {
			v, err := s.extractRelated(ctx, z, r.Target, dest)
			if err != nil {
				return nil, fmt.Errorf("audio_in_slide: %w", err)
			}
			return v, nil
		}
	}
	return nil, nil
}

// getBackgroundImageInSlide is background_image_in_slide: the image of
// slide slide_index+1's background fill (the r:embed of the first a:blip
// under a p:bgPr), nil when the slide has none.
func getBackgroundImageInSlide(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	ppt, index, dest, err := slideArgs("background_image_in_slide", cfg)
	if err != nil {
		return nil, err
	}
	z, err := s.openPresentation(ctx, "background_image_in_slide", ppt)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	f := zipMember(z, "ppt/slides/slide"+strconv.Itoa(index+1)+".xml")
	if f == nil {
		return nil, nil
	}
	b, err := readMember(f, maxSlidePart)
	if err != nil {
		return nil, fmt.Errorf("background_image_in_slide: %w", err)
	}
	id, err := backgroundBlip(b)
	if err != nil {
		return nil, fmt.Errorf("background_image_in_slide: %s: %w", f.Name, err)
	}
	if id == "" {
		return nil, nil
	}
	rels, _, err := slideRels(z, index+1)
	if err != nil {
		return nil, fmt.Errorf("background_image_in_slide: %w", err)
	}
	for _, r := range rels {
		if strings.Contains(r.Type, "image") && r.ID == id {
			v, err := s.extractRelated(ctx, z, r.Target, dest)
			if err != nil {
				return nil, fmt.Errorf("background_image_in_slide: %w", err)
			}
			return v, nil
		}
	}
	return nil, nil
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
