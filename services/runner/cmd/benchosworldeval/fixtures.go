package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"html"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// fixtureSet is one realistic file per format, as pairs: the result file,
// a gold file that matches it (made separately from the same source, as a
// task's gold file is), and a gold file that differs in one place near the
// end, so that a metric cannot stop early on the first page.
type fixtureSet struct {
	sheet, deck, doc, pdf, shot pair
	song, video                 pair
}

type pair struct {
	result, same, differ string
}

// Sizes of the generated files: what a busy OSWorld task can hand a metric.
const (
	sheetRows = 5000
	deckPages = 30
	docPages  = 50
	shotW     = 1920
	shotH     = 1080
)

// makeFixtures writes the sources and has the real applications build the
// files: LibreOffice the xlsx, pptx, docx and PDF files, headless Chromium
// the screenshots, ffmpeg the song and the video.
func makeFixtures(ctx context.Context, dir string) (fixtureSet, error) {
	var fs fixtureSet
	src := filepath.Join(dir, "src")
	out := filepath.Join(dir, "out")
	for _, d := range []string{src, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fs, err
		}
	}
	variants := []string{"result", "same", "differ"}
	var sheets, decks, docs []string
	for _, v := range variants {
		differ := v == "differ"
		s := filepath.Join(src, "sheet_"+v+".csv")
		if err := writeSheetCSV(s, differ); err != nil {
			return fs, err
		}
		d := filepath.Join(src, "deck_"+v+".fodp")
		if err := os.WriteFile(d, []byte(deckFODP(differ)), 0o644); err != nil {
			return fs, err
		}
		t := filepath.Join(src, "doc_"+v+".fodt")
		if err := os.WriteFile(t, []byte(docFODT(differ)), 0o644); err != nil {
			return fs, err
		}
		sheets, decks, docs = append(sheets, s), append(decks, d), append(docs, t)
	}
	// Comma-separated UTF-8 with a header row, said explicitly so that the
	// import does not depend on LibreOffice's guess.
	if err := soffice(ctx, dir, out, "xlsx", sheets, "--infilter=CSV:44,34,76,1"); err != nil {
		return fs, err
	}
	if err := soffice(ctx, dir, out, "pptx", decks); err != nil {
		return fs, err
	}
	if err := soffice(ctx, dir, out, "docx:MS Word 2007 XML", docs); err != nil {
		return fs, err
	}
	// The PDFs are exported from the docx files, as a task's "save as PDF"
	// does from the document the user edited.
	var docx []string
	for _, v := range variants {
		docx = append(docx, filepath.Join(out, "doc_"+v+".docx"))
	}
	pdfDir := filepath.Join(dir, "pdf")
	if err := soffice(ctx, dir, pdfDir, "pdf", docx); err != nil {
		return fs, err
	}
	for _, v := range variants {
		page := filepath.Join(src, "page_"+v+".html")
		if err := os.WriteFile(page, []byte(screenHTML(v == "differ")), 0o644); err != nil {
			return fs, err
		}
		if err := chromiumShot(ctx, dir, page, filepath.Join(out, "shot_"+v+".png")); err != nil {
			return fs, err
		}
	}
	mk := func(d, prefix, ext string) pair {
		return pair{
			result: filepath.Join(d, prefix+"_result."+ext),
			same:   filepath.Join(d, prefix+"_same."+ext),
			differ: filepath.Join(d, prefix+"_differ."+ext),
		}
	}
	song, video, err := makeMedia(ctx, out)
	if err != nil {
		return fs, err
	}
	fs = fixtureSet{
		sheet: mk(out, "sheet", "xlsx"), deck: mk(out, "deck", "pptx"), doc: mk(out, "doc", "docx"),
		pdf: mk(pdfDir, "doc", "pdf"), shot: mk(out, "shot", "png"), song: song, video: video,
	}
	for _, p := range []pair{fs.sheet, fs.deck, fs.doc, fs.pdf, fs.shot, fs.song, fs.video} {
		for _, f := range []string{p.result, p.same, p.differ} {
			if st, err := os.Stat(f); err != nil || st.Size() == 0 {
				return fs, fmt.Errorf("fixture %s was not made: %v", f, err)
			}
		}
	}
	return fs, nil
}

// soffice converts srcs into outDir in one LibreOffice run with a private
// profile, so that it runs beside a user's LibreOffice and other tests.
func soffice(ctx context.Context, dir, outDir, format string, srcs []string, extra ...string) error {
	bin, err := exec.LookPath("soffice")
	if err != nil {
		return fmt.Errorf("LibreOffice makes the fixtures: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	args := []string{"-env:UserInstallation=file://" + filepath.Join(dir, "profile"), "--headless"}
	args = append(args, extra...)
	args = append(args, "--convert-to", format, "--outdir", outDir)
	cmd := exec.CommandContext(ctx, bin, append(args, srcs...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("soffice --convert-to %s: %w\n%s", format, err, out)
	}
	return nil
}

// chromiumShot renders page at the screen size and saves a PNG screenshot.
func chromiumShot(ctx context.Context, dir, page, png string) error {
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		return fmt.Errorf("chromium makes the screenshots: not found on PATH")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "chromium"), fmt.Sprintf("--window-size=%d,%d", shotW, shotH),
		"--screenshot="+png, "file://"+page)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chromium --screenshot: %w\n%s", err, out)
	}
	return nil
}

// words is the vocabulary of the generated prose and cells.
var words = strings.Fields(`quarterly revenue margin forecast region supplier invoice
	shipment budget contract review customer account balance audit ledger
	payment schedule inventory warehouse delivery product service report
	analysis growth decline target estimate variance summary approval
	department manager project milestone deadline resource capacity`)

func sentence(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = words[r.IntN(len(words))]
	}
	w[0] = strings.ToUpper(w[0][:1]) + w[0][1:]
	return strings.Join(w, " ") + "."
}

// writeSheetCSV writes a sales ledger of sheetRows rows; the differing
// variant changes one quantity and its total near the bottom.
func writeSheetCSV(path string, differ bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"Date", "Region", "Rep", "Item", "Units", "UnitCost", "Total", "Note"})
	r := rand.New(rand.NewPCG(1, 2))
	regions := []string{"East", "West", "North", "South", "Central"}
	reps := []string{"Jones", "Kivell", "Jardine", "Gill", "Sorvino", "Andrews", "Thompson", "Morgan"}
	items := []string{"Pencil", "Binder", "Pen", "Desk", "Pen Set"}
	day := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range sheetRows {
		units := 1 + r.IntN(95)
		cost := float64(100+r.IntN(27500)) / 100
		if differ && i == sheetRows-300 {
			units++
		}
		_ = w.Write([]string{
			day.AddDate(0, 0, i/14).Format("2006-01-02"), regions[r.IntN(len(regions))], reps[r.IntN(len(reps))],
			items[r.IntN(len(items))], strconv.Itoa(units), strconv.FormatFloat(cost, 'f', 2, 64),
			strconv.FormatFloat(float64(units)*cost, 'f', 2, 64), sentence(r, 3),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

const odfNS = `xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" ` +
	`xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" ` +
	`xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" ` +
	`xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" ` +
	`xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" ` +
	`xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" ` +
	`xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" ` +
	`xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"`

// deckFODP is a flat ODF presentation of deckPages slides, each with a
// title, a bulleted outline and a small table; the differing variant
// rewords one bullet of the last slide.
func deckFODP(differ bool) string {
	r := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<office:document ` + odfNS + ` office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.presentation">`)
	b.WriteString(`<office:master-styles><style:master-page style:name="Default"/></office:master-styles>`)
	b.WriteString(`<office:body><office:presentation>`)
	for i := range deckPages {
		fmt.Fprintf(&b, `<draw:page draw:name="Slide %d" draw:master-page-name="Default">`, i+1)
		fmt.Fprintf(&b, `<draw:frame presentation:class="title" svg:x="1cm" svg:y="0.8cm" svg:width="26cm" svg:height="2.5cm"><draw:text-box><text:p>%d. %s</text:p></draw:text-box></draw:frame>`,
			i+1, html.EscapeString(sentence(r, 4)))
		b.WriteString(`<draw:frame presentation:class="outline" svg:x="1cm" svg:y="3.8cm" svg:width="15cm" svg:height="12cm"><draw:text-box><text:list>`)
		for j := range 5 {
			s := sentence(r, 8)
			if differ && i == deckPages-1 && j == 4 {
				s = "This bullet was reworded."
			}
			fmt.Fprintf(&b, `<text:list-item><text:p>%s</text:p></text:list-item>`, html.EscapeString(s))
		}
		b.WriteString(`</text:list></draw:text-box></draw:frame>`)
		b.WriteString(`<draw:frame svg:x="17cm" svg:y="3.8cm" svg:width="10cm" svg:height="6cm"><table:table>`)
		b.WriteString(`<table:table-column table:number-columns-repeated="3"/>`)
		for range 4 {
			b.WriteString(`<table:table-row>`)
			for range 3 {
				fmt.Fprintf(&b, `<table:table-cell><text:p>%d</text:p></table:table-cell>`, r.IntN(10000))
			}
			b.WriteString(`</table:table-row>`)
		}
		b.WriteString(`</table:table></draw:frame></draw:page>`)
	}
	b.WriteString(`</office:presentation></office:body></office:document>`)
	return b.String()
}

// docFODT is a flat ODF text document of docPages pages: each page is a
// heading (starting a new page) and five paragraphs that fill it; the
// differing variant changes one word on the last page.
func docFODT(differ bool) string {
	r := rand.New(rand.NewPCG(5, 6))
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<office:document ` + odfNS + ` office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">`)
	b.WriteString(`<office:automatic-styles><style:style style:name="H" style:family="paragraph" style:parent-style-name="Heading_20_1">` +
		`<style:paragraph-properties fo:break-before="page"/></style:style></office:automatic-styles>`)
	b.WriteString(`<office:body><office:text>`)
	for p := range docPages {
		fmt.Fprintf(&b, `<text:h text:style-name="H" text:outline-level="1">Section %d: %s</text:h>`, p+1, html.EscapeString(sentence(r, 3)))
		for j := range 5 {
			var para []string
			for range 6 {
				para = append(para, sentence(r, 12))
			}
			s := strings.Join(para, " ")
			if differ && p == docPages-1 && j == 2 {
				s = "Amended " + s
			}
			fmt.Fprintf(&b, `<text:p text:style-name="Text_20_body">%s</text:p>`, html.EscapeString(s))
		}
	}
	b.WriteString(`</office:text></office:body></office:document>`)
	return b.String()
}

// screenHTML is a desktop-like page (a toolbar, a sidebar and a data grid)
// that fills the screen; the differing variant highlights a row and
// changes a few cells, as an edit an agent made would.
func screenHTML(differ bool) string {
	r := rand.New(rand.NewPCG(7, 8))
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><style>
body{margin:0;font:14px sans-serif;background:#f4f4f4}
.bar{height:40px;background:#2d5a88;color:#fff;padding:10px;font-size:18px}
.side{position:absolute;top:60px;left:0;width:220px;bottom:0;background:#e0e4ea;padding:8px}
.side div{padding:6px;border-bottom:1px solid #c8ccd4}
table{position:absolute;top:70px;left:240px;border-collapse:collapse;background:#fff}
td{border:1px solid #ccc;padding:3px 8px;width:120px}
tr.hl td{background:#ffe08a}
</style></head><body><div class="bar">Quarterly ledger &mdash; report.xlsx</div><div class="side">`)
	for range 25 {
		fmt.Fprintf(&b, `<div>%s</div>`, html.EscapeString(sentence(r, 2)))
	}
	b.WriteString(`</div><table>`)
	for i := range 40 {
		cls := ""
		if differ && i == 17 {
			cls = ` class="hl"`
		}
		fmt.Fprintf(&b, `<tr%s>`, cls)
		for j := range 12 {
			v := strconv.Itoa(r.IntN(100000))
			if differ && i%9 == 4 && j == 7 {
				v = "edited"
			}
			fmt.Fprintf(&b, `<td>%s</td>`, v)
		}
		b.WriteString(`</tr>`)
	}
	b.WriteString(`</table></body></html>`)
	return b.String()
}
