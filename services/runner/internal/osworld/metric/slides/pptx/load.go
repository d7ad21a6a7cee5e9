package pptx

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// nsCT is the namespace of [Content_Types].xml.
const nsCT = "http://schemas.openxmlformats.org/package/2006/content-types"

// xmlPartTypes are the content types python-pptx parses as XML when it
// opens a package; a part of one of these types that does not parse makes
// Presentation() raise, even if nothing reads it later.
var xmlPartTypes = map[string]bool{
	"application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml": true,
	"application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml":                   true,
	"application/vnd.openxmlformats-officedocument.presentationml.template.main+xml":     true,
	"application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml":    true,
	"application/vnd.openxmlformats-package.core-properties+xml":                         true,
	"application/vnd.openxmlformats-officedocument.presentationml.notesMaster+xml":       true,
	"application/vnd.openxmlformats-officedocument.presentationml.notesSlide+xml":        true,
	"application/vnd.openxmlformats-officedocument.presentationml.slide+xml":             true,
	"application/vnd.openxmlformats-officedocument.presentationml.slideLayout+xml":       true,
	"application/vnd.openxmlformats-officedocument.presentationml.slideMaster+xml":       true,
	"application/vnd.openxmlformats-officedocument.drawingml.chart+xml":                  true,
}

// checkLoadable does what python-pptx's package loader does before any
// metric code runs: it follows every relationship from the package root,
// needs a content type for each part it reaches (parts missing from the
// zip are skipped), and parses the parts of the XML types it knows.
func (pk *Package) checkLoadable() error {
	ct, err := pk.XML("[Content_Types].xml")
	if err != nil {
		return err
	}
	overrides, defaults := map[string]string{}, map[string]string{}
	for _, o := range ct.ChildrenNamed(nsCT, "Override") {
		name, _ := o.Attr("", "PartName")
		typ, _ := o.Attr("", "ContentType")
		overrides[strings.ToLower(name)] = typ
	}
	for _, d := range ct.ChildrenNamed(nsCT, "Default") {
		ext, _ := d.Attr("", "Extension")
		typ, _ := d.Attr("", "ContentType")
		defaults[strings.ToLower(ext)] = typ
	}
	visited := map[string]bool{"": true}
	stack := []string{""}
	for len(stack) > 0 {
		part := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		rels, err := pk.Rels(part)
		if err != nil {
			return err
		}
		for _, r := range rels {
			if r.External || visited[r.Target] {
				continue
			}
			visited[r.Target] = true
			stack = append(stack, r.Target)
		}
	}
	pk.types = map[string]string{}
	for part := range visited {
		if part == "" || !pk.Has(part) {
			continue
		}
		typ, ok := overrides[strings.ToLower("/"+part)]
		if !ok {
			typ, ok = defaults[strings.ToLower(strings.TrimPrefix(path.Ext(part), "."))]
		}
		if !ok {
			return fmt.Errorf("pptx: no content type for %q", part)
		}
		pk.types[part] = typ
		if xmlPartTypes[typ] {
			if _, err := pk.XML(part); err != nil {
				return err
			}
		}
	}
	if len(visited) == 1 {
		return errors.New("pptx: package has no relationships")
	}
	return nil
}

// checkType fails unless part was loaded with a content type ending in
// suffix: python-pptx builds a part's class from its content type, and a
// slide that is not a SlidePart (say) has none of the slide's attributes.
func (pk *Package) checkType(part, suffix string) error {
	if !strings.HasSuffix(pk.types[part], suffix) {
		return fmt.Errorf("pptx: %q has content type %q, want *%s", part, pk.types[part], suffix)
	}
	return nil
}
