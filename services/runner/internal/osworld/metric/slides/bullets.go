package slides

import (
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/slides/pptx"
)

// Stand-ins for slides.py's placeholder strings and None in a bullet
// tuple.
const (
	noLevel  = "No Level"
	noBullet = "No Bullet"
	pyNone   = "\x00None"
)

type bullet struct{ lvl, char, text string }

// bulletCheck compares the bullets of two slides once: slides.py repeats
// the same whole-slide comparison for every run pair it visits.
type bulletCheck struct {
	s1, s2 *pptx.Slide
	done   bool
	ok     bool
}

func (b *bulletCheck) same() bool {
	if !b.done {
		b.done = true
		l1, ok1 := slideBullets(b.s1.Root)
		l2, ok2 := slideBullets(b.s2.Root)
		// A failed extraction skips the comparison (slides.py's bare
		// except).
		b.ok = !ok1 || !ok2 || sameBullets(l1, l2)
	}
	return b.ok
}

// slideBullets is slides.py's _extract_bullets over a slide's XML: the
// level, bullet character and text of every paragraph with text. ok is
// false where Python raises: an empty a:t (whose text is None) fails the
// join.
func slideBullets(root *pptx.Element) ([]bullet, bool) {
	var out []bullet
	for _, p := range root.Descendants(pptx.NSA, "p") {
		b := bullet{lvl: noLevel, char: noBullet}
		if pPr := p.Child(pptx.NSA, "pPr"); pPr != nil {
			b.lvl = attrOrNone(pPr, "lvl")
			b.char = noBullet
			if bu := pPr.Child(pptx.NSA, "buChar"); bu != nil {
				b.char = attrOrNone(bu, "char")
			}
		}
		var text []byte
		for _, t := range p.Descendants(pptx.NSA, "t") {
			if t.Text == nil {
				return nil, false
			}
			text = append(text, *t.Text...)
		}
		b.text = string(text)
		if metric.PyStrip(b.text) != "" {
			out = append(out, b)
		}
	}
	return out, true
}

func attrOrNone(e *pptx.Element, name string) string {
	if v, ok := e.Attr("", name); ok {
		return v
	}
	return pyNone
}

// sameBullets is _compare_bullets_with_tolerance: same texts and bullet
// characters; levels (None read as "0") only where a bullet shows; colours
// never.
func sameBullets(l1, l2 []bullet) bool {
	if len(l1) != len(l2) {
		return false
	}
	for i := range l1 {
		a, b := l1[i], l2[i]
		if a.text != b.text || a.char != b.char {
			return false
		}
		if a.char != noBullet || b.char != noBullet {
			if normLevel(a.lvl) != normLevel(b.lvl) {
				return false
			}
		}
	}
	return true
}

func normLevel(l string) string {
	if l == pyNone {
		return "0"
	}
	return l
}
