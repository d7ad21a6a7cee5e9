package docs

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// randomTabPara is a paragraph with tab stops (each alignment python-docx
// knows, clear, a left stop at 0, positions in twips or with a unit, now
// and then one python-docx cannot read) and words split by tabs.
func randomTabPara(rng *rand.Rand) string {
	var tabs strings.Builder
	for range rng.IntN(4) {
		val := []string{"left", "center", "right", "decimal", "bar", "clear", "left", "num", "start", "end", "bogus"}[rng.IntN(11)]
		pos := []string{"0", "720", "1440", "4320", "9000", "-360", "2.5in", "3cm", "abc"}[rng.IntN(9)]
		fmt.Fprintf(&tabs, `<w:tab w:val="%s" w:pos="%s"/>`, val, pos)
	}
	pr := ""
	if tabs.Len() > 0 {
		pr = "<w:tabs>" + tabs.String() + "</w:tabs>"
	}
	var b strings.Builder
	b.WriteString(`<w:p><w:pPr>` + pr + `</w:pPr>`)
	for range rng.IntN(4) {
		if rng.IntN(3) == 0 {
			b.WriteString(`<w:r><w:tab/></w:r>`)
			continue
		}
		words := []string{"The quick brown", "fox", "jumps over", " ", "a\u00a0b", "one two three four"}[rng.IntN(6)]
		fmt.Fprintf(&b, `<w:r><w:t xml:space="preserve">%s</w:t></w:r>`, xmlEscape(words))
	}
	b.WriteString(`</w:p>`)
	return b.String()
}

// randomSectPr is a section's page size and margins, sometimes missing or
// partial, or none at all.
func randomSectPr(rng *rand.Rand) string {
	switch rng.IntN(6) {
	case 0:
		return ""
	case 1:
		return `<w:sectPr/>`
	}
	w := []string{"12240", "11906", "15840"}[rng.IntN(3)]
	margins := []string{`<w:pgMar w:left="1440" w:right="1440" w:top="1440" w:bottom="1440"/>`, `<w:pgMar w:left="1800" w:right="720"/>`, ``}[rng.IntN(3)]
	return `<w:sectPr><w:pgSz w:w="` + w + `" w:h="15840"/>` + margins + `</w:sectPr>`
}

// TestTabstopsMatchDocsPy scores random pairs of documents with tab stops
// with check_tabstops (1 published task, with its options and others)
// here and with OSWorld's docs.py on python-docx 1.x, and wants the same
// scores. It runs as TestMetricsMatchDocsPy does (OSWORLD_REF,
// PYTHON_DOCX).
func TestTabstopsMatchDocsPy(t *testing.T) {
	metrics, src := pythonDocx(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 17))
	const pairs = 1500
	var jobs []docsPyJob
	bodies := map[string]string{}
	for i := range pairs {
		var ps []string
		for range rng.IntN(4) {
			ps = append(ps, randomTabPara(rng))
		}
		a := strings.Join(ps, "")
		b := a
		if k := rng.IntN(3); k == 0 {
			// The same stops, one moved: a score between 0 and 1.
			for _, from := range []string{`w:pos="720"`, `w:pos="1440"`, `w:pos="4320"`, `w:pos="9000"`} {
				if strings.Contains(b, from) {
					b = strings.Replace(b, from, []string{`w:pos="800"`, `w:pos="4000"`, `w:pos="0"`}[rng.IntN(3)], 1)
					break
				}
			}
		} else if k == 1 {
			ps2 := append([]string(nil), ps...)
			if len(ps2) > 0 {
				ps2[rng.IntN(len(ps2))] = randomTabPara(rng)
			}
			b = strings.Join(ps2, "")
		}
		a += randomSectPr(rng)
		b += randomSectPr(rng)
		pa, pb := filepath.Join(dir, fmt.Sprintf("a%04d.docx", i)), filepath.Join(dir, fmt.Sprintf("b%04d.docx", i))
		writeWordXML(t, dir, filepath.Base(pa), a)
		writeWordXML(t, dir, filepath.Base(pb), b)
		bodies[pa] = a
		kw := map[string]any{}
		if rng.IntN(2) == 0 {
			kw["word_number_split_by_tabstop"] = float64(rng.IntN(4))
			if rng.IntN(2) == 0 {
				kw["index"] = float64(rng.IntN(3))
			}
		}
		jobs = append(jobs, docsPyJob{"check_tabstops", []any{pa, pb}, kw})
	}
	want := runDocsPy(t, metrics, src, dir, jobs)
	compareDocsPy(t, jobs, want, func(j docsPyJob) string { return "result body: " + bodies[j.Args[0].(string)] })
}
