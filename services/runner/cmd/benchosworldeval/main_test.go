package main

import (
	"archive/zip"
	"context"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
)

// TestEvalTasks checks that every measured metric is in the runner's
// registry and that its task parses as the evaluator will read it.
func TestEvalTasks(t *testing.T) {
	for _, name := range []string{"compare_table", "compare_pptx_files", "compare_docx_files", "compare_pdfs", "compare_images", "compare_audios", "compare_videos"} {
		if _, ok := osworld.MetricOptions(name); !ok {
			t.Errorf("metric %s is not registered", name)
			continue
		}
		task, err := evalTask(bench{metric: name}, "result.x", "expected.x")
		if err != nil {
			t.Errorf("evalTask(%s): %v", name, err)
			continue
		}
		if got := task.Evaluator.Func; len(got) != 1 || got[0] != name {
			t.Errorf("evalTask(%s).Evaluator.Func = %v, want [%s]", name, got, name)
		}
		if _, _, unsupported := task.Unsupported(); unsupported {
			t.Errorf("evalTask(%s) needs something the runner lacks: %v", name, task.Missing())
		}
	}
}

func needProgram(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required under CI: %v", name, err)
			}
			t.Skipf("%s not installed: %v", name, err)
		}
	}
}

// TestFixtures makes the files with the real applications and checks they
// have the sizes the benchmark claims, and that the matching pair holds
// the same content and the differing pair does not.
func TestFixtures(t *testing.T) {
	needProgram(t, "soffice", "chromium", "pdfinfo", "ffmpeg", "ffprobe")
	dir := t.TempDir()
	fx, err := makeFixtures(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	zipPart := func(path, name string) string {
		t.Helper()
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		f, err := zr.Open(name)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 64<<20))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	countParts := func(path string, re *regexp.Regexp) int {
		t.Helper()
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		n := 0
		for _, f := range zr.File {
			if re.MatchString(f.Name) {
				n++
			}
		}
		return n
	}

	sheet := zipPart(fx.sheet.result, "xl/worksheets/sheet1.xml")
	if got := strings.Count(sheet, "<row "); got != sheetRows+1 {
		t.Errorf("sheet rows = %d, want %d (header and data)", got, sheetRows+1)
	}
	if zipPart(fx.sheet.same, "xl/worksheets/sheet1.xml") != sheet {
		t.Error("the matching sheet's data differs from the result's")
	}
	if zipPart(fx.sheet.differ, "xl/worksheets/sheet1.xml") == sheet {
		t.Error("the differing sheet's data is the result's")
	}

	slide := regexp.MustCompile(`^ppt/slides/slide\d+\.xml$`)
	if got := countParts(fx.deck.result, slide); got != deckPages {
		t.Errorf("deck slides = %d, want %d", got, deckPages)
	}
	last := fmt.Sprintf("ppt/slides/slide%d.xml", deckPages)
	if zipPart(fx.deck.differ, last) == zipPart(fx.deck.result, last) {
		t.Error("the differing deck's last slide is the result's")
	}

	for _, p := range []string{fx.pdf.result, fx.pdf.differ} {
		out, err := exec.Command("pdfinfo", p).Output()
		if err != nil {
			t.Fatalf("pdfinfo %s: %v", p, err)
		}
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^Pages:\s+%d$`, docPages)).Match(out) {
			t.Errorf("%s: want %d pages, pdfinfo says\n%s", p, docPages, out)
		}
	}
	if doc := zipPart(fx.doc.result, "word/document.xml"); !strings.Contains(doc, fmt.Sprintf("Section %d:", docPages)) ||
		strings.Contains(doc, "Amended") || !strings.Contains(zipPart(fx.doc.differ, "word/document.xml"), "Amended") {
		t.Error("the documents do not hold the sections and the one amended paragraph they should")
	}

	// The song and the video: their length, and the video's size, as
	// ffprobe reads them.
	probe := func(path, stream, entries string) string {
		t.Helper()
		out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", stream, "-show_entries", entries,
			"-of", "default=noprint_wrappers=1:nokey=1", path).Output()
		if err != nil {
			t.Fatalf("ffprobe %s: %v", path, err)
		}
		return strings.TrimSpace(string(out))
	}
	for _, p := range []string{fx.song.result, fx.song.same, fx.song.differ} {
		var secs float64
		fmt.Sscan(probe(p, "a:0", "format=duration"), &secs)
		if secs < songSeconds-1 || secs > songSeconds+1 {
			t.Errorf("%s lasts %v s, want %d", p, secs, songSeconds)
		}
	}
	for _, p := range []string{fx.video.result, fx.video.same, fx.video.differ} {
		if got, want := probe(p, "v:0", "stream=width,height,nb_frames"), fmt.Sprintf("%d\n%d\n%d", videoW, videoH, videoSeconds*videoFPS); got != want {
			t.Errorf("%s: width, height and frames %q, want %q", p, got, want)
		}
	}
	// The differing song plays other notes over its last 20 s only, and the
	// differing video is turned from its 3rd second: compare a frame of
	// audio or video before and after that point with the result's.
	grab := func(path string, args ...string) []byte {
		t.Helper()
		out, err := exec.Command("ffmpeg", append(append([]string{"-nostdin", "-v", "error"}, args[:2]...),
			append([]string{"-i", path}, args[2:]...)...)...).Output()
		if err != nil || len(out) == 0 {
			t.Fatalf("ffmpeg %s %v: %v", path, args, err)
		}
		return out
	}
	rms := func(a, b []byte) float64 {
		n := min(len(a), len(b)) / 2
		sum := 0.0
		for i := range n {
			d := float64(int16(uint16(a[2*i])|uint16(a[2*i+1])<<8)) - float64(int16(uint16(b[2*i])|uint16(b[2*i+1])<<8))
			sum += d * d
		}
		return math.Sqrt(sum / float64(n))
	}
	pcm := func(path string, at int) []byte {
		return grab(path, "-ss", strconv.Itoa(at), "-t", "1", "-ac", "1", "-f", "s16le", "-")
	}
	early, late := songSeconds-40, songSeconds-10
	if d := rms(pcm(fx.song.result, early), pcm(fx.song.differ, early)); d > 2000 {
		t.Errorf("the songs differ at %d s (rms %v): want them alike before the last 20 s", early, d)
	}
	if d := rms(pcm(fx.song.result, late), pcm(fx.song.differ, late)); d < 2000 {
		t.Errorf("the songs are alike at %d s (rms %v): want other notes in the last 20 s", late, d)
	}
	meanAbs := func(a, b []byte) float64 {
		n := min(len(a), len(b))
		sum := 0
		for i := range n {
			sum += max(int(a[i])-int(b[i]), int(b[i])-int(a[i]))
		}
		return float64(sum) / float64(n)
	}
	frame := func(path string, at int) []byte {
		return grab(path, "-ss", strconv.Itoa(at), "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "gray", "-")
	}
	if d := meanAbs(frame(fx.video.result, 1), frame(fx.video.differ, 1)); d > 5 {
		t.Errorf("the videos differ at 1 s (mean difference %v)", d)
	}
	if d := meanAbs(frame(fx.video.result, videoDifferAt+1), frame(fx.video.differ, videoDifferAt+1)); d < 20 {
		t.Errorf("the videos are alike at %d s (mean difference %v): want the differing one turned", videoDifferAt+1, d)
	}

	for _, p := range []string{fx.shot.result, fx.shot.same, fx.shot.differ} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width != shotW || cfg.Height != shotH {
			t.Errorf("%s: %dx%d (%v), want %dx%d", p, cfg.Width, cfg.Height, err, shotW, shotH)
		}
	}
}
