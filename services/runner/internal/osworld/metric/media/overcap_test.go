package media

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// TestImagesOverCap: an image over the 40-megapixel cap that PIL would
// open (it refuses past about 179 megapixels) is not scored: every image
// metric returns an error wrapping metric.ErrOverCap that names the cap,
// whichever side the image is on. It scored 0. An image PIL refuses too
// still scores 0.
func TestImagesOverCap(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// 8000×8000 is 64 megapixels: over the cap, under PIL's bound.
	big := write("big.png", fakePNG(8000, 8000))
	bomb := write("bomb.png", fakePNG(20000, 20000))
	src := fixture("src.png")
	const wantText = "image of 8000x8000 pixels is over the cap of 41943040 pixels"
	pairs := []string{"compare_images", "check_structure_sim", "check_image_mirror", "compare_image_list",
		"check_brightness_decrease_and_structure_sim", "check_saturation_increase_and_structure_sim",
		"check_contrast_increase_and_structure_sim", "check_palette_and_structure_sim", "check_structure_sim_resized",
		"check_structure_sim_with_threshold", "check_green_background", "check_file_exists_and_structure_sim"}
	type call struct {
		name             string
		metric           string
		result, expected any
	}
	var overCap []call
	for _, m := range pairs {
		overCap = append(overCap, call{m + " result", m, big, src}, call{m + " expected", m, src, big})
	}
	overCap = append(overCap,
		call{"check_textbox_on_leftside", "check_textbox_on_leftside", big, nil},
		call{"check_triangle_position", "check_triangle_position", big, nil},
		call{"check_image_size", "check_image_size", big, map[string]any{"width": 96.0}},
	)
	for _, tt := range overCap {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Metrics()[tt.metric].Fn(context.Background(), tt.result, tt.expected, tt.expected != nil, nil)
			if !errors.Is(err, metric.ErrOverCap) {
				t.Fatalf("%s = %v, %v; want an error wrapping metric.ErrOverCap", tt.metric, got, err)
			}
			if !strings.Contains(err.Error(), wantText) {
				t.Errorf("%s error = %q, want it to contain %q", tt.metric, err, wantText)
			}
		})
	}
	t.Run("past PIL's bound", func(t *testing.T) {
		if got, err := Metrics()["compare_images"].Fn(context.Background(), bomb, src, true, nil); err != nil || got != 0 {
			t.Errorf("compare_images of a 400-megapixel image = %v, %v; want 0 as PIL's DecompressionBombError", got, err)
		}
	})
}

// TestMP3TagOverCap: an ID3v2 tag over the 16 MiB cap, which mutagen
// reads, is not scored; it scored 0.
func TestMP3TagOverCap(t *testing.T) {
	const n = maxTagBytes + 1
	head := []byte{'I', 'D', '3', 3, 0, 0, byte(n >> 21 & 0x7f), byte(n >> 14 & 0x7f), byte(n >> 7 & 0x7f), byte(n & 0x7f)}
	p := filepath.Join(t.TempDir(), "big-tag.mp3")
	if err := os.WriteFile(p, head, 0o644); err != nil {
		t.Fatal(err)
	}
	rule := map[string]any{"title": map[string]any{"method": "eq", "ref": "x"}}
	got, err := Metrics()["check_mp3_meta"].Fn(context.Background(), p, rule, true, nil)
	if !errors.Is(err, metric.ErrOverCap) || !strings.Contains(err.Error(), "over the cap of 16777216") {
		t.Errorf("check_mp3_meta of a %d-byte tag = %v, %v; want an error wrapping metric.ErrOverCap naming the cap", n, got, err)
	}
}

// capCase is a metric call on an input at or over one of the caps: with
// capText set, the call must fail with an error wrapping
// metric.ErrOverCap whose message contains capText (the cap and what is
// over it); without, it must score want with no error.
type capCase struct {
	name             string
	metric           string
	result, expected any
	capText          string
	want             float64
}

// runCapCases runs each case through the public metric table.
func runCapCases(t *testing.T, cases []capCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Metrics()[tt.metric].Fn(context.Background(), tt.result, tt.expected, true, nil)
			if tt.capText == "" {
				if err != nil || got != tt.want {
					t.Errorf("%s = %v, %v; want %v", tt.metric, got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, metric.ErrOverCap) {
				t.Fatalf("%s = %v, %v; want an error wrapping metric.ErrOverCap", tt.metric, got, err)
			}
			if !strings.Contains(err.Error(), tt.capText) {
				t.Errorf("%s error = %q, want it to contain %q", tt.metric, err, tt.capText)
			}
		})
	}
}

// TestVideoFrameOverCap: a video frame two rows past the 40-megapixel cap
// (8192×5122; lavfi sources keep even sizes), which OpenCV reads, is not
// scored: compare_videos returns an error wrapping metric.ErrOverCap that
// names the cap, on either side. A frame of exactly 8192×5120 is read:
// paired with a missing video it scores 0 with no error, as OpenCV gives
// a frame for one and none for the other (hashing two such frames would
// take the test 20 s under the race detector).
func TestVideoFrameOverCap(t *testing.T) {
	needTools(t, "ffmpeg")
	dir := t.TempDir()
	// One MJPEG frame of a flat colour: a few hundred kB, made and decoded
	// in about a second.
	frame := func(name, size string) string {
		return ffmpegVideo(t, dir, name, "color=c=gray:s="+size, "-frames:v", "1", "-c:v", "mjpeg")
	}
	over := frame("over.mkv", "8192x5122")
	at := frame("at.mkv", "8192x5120")
	small := frame("small.mkv", "160x120")
	const capText = "video frame of 8192x5122 pixels is over the cap of 41943040 pixels"
	runCapCases(t, []capCase{
		{"result over", "compare_videos", over, small, capText, 0},
		{"expected over", "compare_videos", small, over, capText, 0},
		{"at the cap", "compare_videos", at, filepath.Join(dir, "missing.mkv"), "", 0},
	})
}

// TestAudioOverCap: audio one sample longer than the 15-minute cap, at
// librosa's rate (22050 Hz) or before resampling to it, is not scored:
// compare_audios returns an error wrapping metric.ErrOverCap that names
// the cap, on either side. Audio of exactly 15 minutes loads: paired with a missing
// file it scores 0 as OSWorld does, with no error (the missing file also
// spares the test 15 minutes of MFCCs).
func TestAudioOverCap(t *testing.T) {
	needTools(t, "ffmpeg", "ffprobe", "sndfile-info", "sndfile-convert")
	dir := t.TempDir()
	// Silence at librosa's rate, so that the decoded length is exact; FLAC
	// holds 15 minutes of it in about 120 kB.
	silence := func(name string, rate, samples int) string {
		return ffmpegAudio(t, dir, name, fmt.Sprintf("anullsrc=r=%d:cl=mono", rate), "-af", fmt.Sprintf("atrim=end_sample=%d", samples), "-c:a", "flac")
	}
	over := silence("over.flac", audioRate, maxAudioSeconds*audioRate+1)
	at := silence("at.flac", audioRate, maxAudioSeconds*audioRate)
	// At another rate the cap is counted before resampling.
	over44 := silence("over44.flac", 44100, maxAudioSeconds*44100+1)
	tone := ffmpegAudio(t, dir, "tone.wav", "sine=frequency=440:duration=1")
	missing := filepath.Join(dir, "missing.wav")
	const capText = "is longer than the cap of 900 s"
	runCapCases(t, []capCase{
		{"result over", "compare_audios", over, tone, capText, 0},
		{"expected over", "compare_audios", tone, over, capText, 0},
		{"result over at 44.1 kHz", "compare_audios", over44, tone, capText, 0},
		{"at the cap", "compare_audios", at, missing, "", 0},
	})
}

// imagesPDF writes a one-page PDF that draws n distinct 8×8 grey images,
// each its own XObject: PyMuPDF's get_images lists n images.
func imagesPDF(t *testing.T, path string, n int) string {
	t.Helper()
	w := newPDF()
	var res, content strings.Builder
	res.WriteString("/XObject <<")
	for i := range n {
		im := w.stream("/Type /XObject /Subtype /Image /Width 8 /Height 8 /ColorSpace /DeviceGray /BitsPerComponent 8",
			bytes.Repeat([]byte{byte(i)}, 64), true)
		fmt.Fprintf(&res, " /Im%d %d 0 R", i, im)
		fmt.Fprintf(&content, "q 8 0 0 8 %d %d cm /Im%d Do Q\n", i%25*10, i/25*10, i)
	}
	res.WriteString(" >>")
	w.page(300, 300, res.String(), []byte(content.String()))
	return w.write(t, path)
}

// TestPDFImagesOverCap: compare_pdf_images does not score a PDF of 501
// images, one past the cap, which PyMuPDF lists and PIL opens, nor a PDF
// with an image two rows past the 40-megapixel cap, a JPEG or one MuPDF
// would decode (which mutool is not let to): an error wrapping
// metric.ErrOverCap names the cap, on either side. A PDF of exactly 500
// images is compared (with itself: 1).
//
// The pixel cap's other side is not run here: decoding and hashing a
// 40-megapixel image takes over ten seconds under the race detector, and
// TestImagesOverCap covers the decoder's bound.
func TestPDFImagesOverCap(t *testing.T) {
	needTools(t, "mutool", "ffmpeg")
	dir := t.TempDir()
	p500 := imagesPDF(t, filepath.Join(dir, "500.pdf"), maxPDFImages)
	p501 := imagesPDF(t, filepath.Join(dir, "501.pdf"), maxPDFImages+1)
	one := imagesPDF(t, filepath.Join(dir, "one.pdf"), 1)
	// A JPEG of 8192×5122 embedded as it is (DCTDecode): PyMuPDF's
	// extract_image returns it unchanged.
	jpg := filepath.Join(dir, "big.jpg")
	run(t, "ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "color=c=gray:s=8192x5122",
		"-frames:v", "1", "-c:v", "mjpeg", jpg)
	data, err := os.ReadFile(jpg)
	if err != nil {
		t.Fatal(err)
	}
	w := newPDF()
	im := w.stream("/Type /XObject /Subtype /Image /Width 8192 /Height 5122 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode", data, false)
	w.page(300, 300, fmt.Sprintf("/XObject << /Im0 %d 0 R >>", im), []byte("q 300 0 0 188 0 0 cm /Im0 Do Q"))
	big := w.write(t, filepath.Join(dir, "big.pdf"))
	// A Flate image of 8000×8000 (its data is never read).
	w = newPDF()
	im = w.stream("/Type /XObject /Subtype /Image /Width 8000 /Height 8000 /ColorSpace /DeviceGray /BitsPerComponent 8", []byte{0}, true)
	w.page(300, 300, fmt.Sprintf("/XObject << /Im0 %d 0 R >>", im), []byte("q 300 0 0 300 0 0 cm /Im0 Do Q"))
	bigFlate := w.write(t, filepath.Join(dir, "big-flate.pdf"))
	const countText = "has 501 images, over the cap of 500"
	const pixelText = "image of 8192x5122 pixels is over the cap of 41943040 pixels"
	runCapCases(t, []capCase{
		{"501 images, result", "compare_pdf_images", p501, p500, countText, 0},
		{"501 images, expected", "compare_pdf_images", p500, p501, countText, 0},
		{"image over the pixel cap, result", "compare_pdf_images", big, one, pixelText, 0},
		{"image over the pixel cap, expected", "compare_pdf_images", one, big, pixelText, 0},
		{"decoded image over the pixel cap", "compare_pdf_images", bigFlate, one, "image of 8000x8000 pixels is over the cap of 41943040 pixels", 0},
		{"500 images", "compare_pdf_images", p500, p500, "", 1},
	})
}

// textPDF writes a one-page PDF of the lines in 10-point Courier, 12
// points apart.
func textPDF(t *testing.T, path string, lines []string) string {
	t.Helper()
	w := newPDF()
	font := w.add("<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>")
	width, height := 20, 12*len(lines)+20
	var content strings.Builder
	fmt.Fprintf(&content, "BT /F1 10 Tf 12 TL 10 %d Td\n", height-10)
	for _, l := range lines {
		width = max(width, 6*len(l)+20)
		content.WriteString("(" + l + ") '\n")
	}
	content.WriteString("ET\n")
	w.page(width, height, fmt.Sprintf("/Font << /F1 %d 0 R >>", font), []byte(content.String()))
	return w.write(t, path)
}

// TestPDFTextOverCap: compare_pdfs does not score two PDFs whose texts
// differ throughout, 540,999 characters each (1000 lines of 540): the
// LCS would cover 540,999² character pairs, past the cap of 2^38 (about
// ten seconds of work), where rapidfuzz compares them. An error wrapping
// metric.ErrOverCap names the cap. Texts as long that differ in one line
// are compared, since only what lies between their common prefix and
// suffix counts. (Two texts just under the cap would take the LCS
// seconds, minutes under the race detector.)
func TestPDFTextOverCap(t *testing.T) {
	needTools(t, "mutool")
	dir := t.TempDir()
	const nLines, lineLen = 1000, 540
	lines := func(ch string) []string {
		l := make([]string, nLines)
		for i := range l {
			l[i] = strings.Repeat(ch, lineLen)
		}
		return l
	}
	as := textPDF(t, filepath.Join(dir, "a.pdf"), lines("a"))
	bs := textPDF(t, filepath.Join(dir, "b.pdf"), lines("b"))
	oneLine := lines("a")
	oneLine[nLines/2] = strings.Repeat("b", lineLen)
	middle := textPDF(t, filepath.Join(dir, "middle.pdf"), oneLine)
	// The texts are the lines joined by newlines; one line of a's against
	// one of b's has no common character.
	const n = nLines*(lineLen+1) - 1
	runCapCases(t, []capCase{
		{"differing throughout", "compare_pdfs", as, bs, "texts of 540999 and 540999 characters are too long to compare (over 274877906944 character pairs)", 0},
		{"one line differs", "compare_pdfs", middle, as, "", float64(2*(n-lineLen)) / float64(2*n)},
	})
}

// TestToolOutputOverCap: a tool's output past the 64 MiB cap is an error
// wrapping metric.ErrOverCap that names the cap, so the input it came from
// is not scored; output at the cap is read whole. The cap did not hold:
// os/exec filled the buffer through its embedded bytes.Buffer's ReadFrom,
// past the capped Write, and pdfinfo's 75 MB output for a PDF with a 12 MiB
// title was read whole. (compare_pdfs reaches the cap through mutool
// with a text over 64 MiB, or pdftotext when mutool is missing.)
func TestToolOutputOverCap(t *testing.T) {
	needTools(t, "head")
	for _, tt := range []struct {
		name  string
		bytes int
		over  bool
	}{
		{"one byte over", maxToolOutput + 1, true},
		{"at the cap", maxToolOutput, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runTool(context.Background(), "head", "-c", strconv.Itoa(tt.bytes), "/dev/zero")
			if tt.over {
				if !errors.Is(err, metric.ErrOverCap) || !strings.Contains(err.Error(), "head: output over 67108864 bytes") {
					t.Errorf("runTool of %d bytes = %d bytes, %v; want an error wrapping metric.ErrOverCap naming the cap", tt.bytes, len(out), err)
				}
				return
			}
			if err != nil || len(out) != tt.bytes {
				t.Errorf("runTool of %d bytes = %d bytes, %v; want them all", tt.bytes, len(out), err)
			}
		})
	}
}

// TestVLCStatusDepthOverCap: a VLC status.xml nested 257 elements deep,
// one past the cap, which ElementTree parses, is not scored by
// is_vlc_playing: an error wrapping metric.ErrOverCap names the cap. At
// 256 levels the file is read, and the playing file is found.
func TestVLCStatusDepthOverCap(t *testing.T) {
	status := func(depth int) string {
		// The root, then a chain of depth-1 nested elements beside the
		// state and the file name.
		nest := strings.Repeat("<d>", depth-1) + strings.Repeat("</d>", depth-1)
		return writeText(t, `<root><state>playing</state><information><category name="meta">`+
			`<info name="filename">clip.mp4</info></category></information>`+nest+`</root>`)
	}
	rule := map[string]any{"type": "file_name", "file_name": "clip.mp4"}
	runCapCases(t, []capCase{
		{"257 levels", "is_vlc_playing", status(maxXMLDepth + 1), rule, "xml nested deeper than 256 elements", 0},
		{"256 levels", "is_vlc_playing", status(maxXMLDepth), rule, "", 1},
	})
}

// padFile writes text, then pad, then spaces up to size bytes.
func padFile(t *testing.T, path, text, pad string, size int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text + pad); err != nil {
		t.Fatal(err)
	}
	spaces := bytes.Repeat([]byte(" "), 1<<20)
	for left := size - int64(len(text)+len(pad)); left > 0; left -= int64(len(spaces)) {
		if _, err := f.Write(spaces[:min(left, int64(len(spaces)))]); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// TestConfigFilesOverCap: a vlcrc, gimprc or status.xml over the 64 MiB a
// metric reads of a file, which OSWorld reads whole, is not scored by the
// metrics that read it (one of each kind of check): an error wrapping
// metric.ErrOverCap names the cap. The padding is a comment line of
// spaces (trailing blanks for the XML), so OSWorld would score these
// files as the unpadded ones. A vlcrc of exactly 64 MiB is read.
func TestConfigFilesOverCap(t *testing.T) {
	dir := t.TempDir()
	rc, err := os.ReadFile(vlcrc(t))
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fixture("vlc-status-playing.xml"))
	if err != nil {
		t.Fatal(err)
	}
	const over = metric.MaxFile + 1
	bigRC := padFile(t, filepath.Join(dir, "vlcrc"), string(rc), "\n#", over)
	bigGIMP := padFile(t, filepath.Join(dir, "gimprc"), gimprc, "#", over)
	bigStatus := padFile(t, filepath.Join(dir, "status.xml"), string(status), "\n", over)
	atRC := padFile(t, filepath.Join(dir, "vlcrc-at"), string(rc), "\n#", metric.MaxFile)
	const capText = "over 67108864 bytes"
	runCapCases(t, []capCase{
		{"vlcrc value", "check_qt_bgcone", bigRC, map[string]any{"expected_qt_bgcone": 1.0}, capText, 0},
		{"vlcrc global key", "check_global_key_play_pause", bigRC, map[string]any{"expected_global_key_play_pause": 0.0}, capText, 0},
		{"vlcrc record path", "is_vlc_recordings_folder", bigRC, map[string]any{"recording_file_path": "/home/user"}, capText, 0},
		{"vlcrc slider colours", "check_qt_slider_colours", bigRC, map[string]any{"type": "blackish"}, capText, 0},
		{"gimprc", "check_config_status", bigGIMP, map[string]any{"key": "theme", "value": `"Light"`}, capText, 0},
		{"status.xml", "is_vlc_playing", bigStatus, map[string]any{"type": "file_name", "file_name": "tone clip.mp4"}, capText, 0},
		{"vlcrc at the cap", "check_qt_bgcone", atRC, map[string]any{"expected_qt_bgcone": 1.0}, "", 1},
	})
}

// TestLargeJPEGWithDjpeg: a JPEG under the pixel cap whose decoded PPM is
// over the 64 MiB cap on a tool's output (5120×4400 RGB, 67.6 MB) is
// still decoded by djpeg, as PIL decodes it with libjpeg: its pixels are
// djpeg's, not those of Go's decoder, which differ in about 1% of the
// samples. djpeg's output is bounded by the pixel cap instead.
func TestLargeJPEGWithDjpeg(t *testing.T) {
	needTools(t, "ffmpeg", "djpeg")
	dir := t.TempDir()
	jpg := filepath.Join(dir, "large.jpg")
	run(t, "ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=5120x4400",
		"-frames:v", "1", "-c:v", "mjpeg", "-q:v", "5", jpg)
	img, err := openImage(jpg)
	if err != nil {
		t.Fatal(err)
	}
	ppm := filepath.Join(dir, "large.ppm")
	run(t, "djpeg", "-pnm", "-outfile", ppm, jpg)
	want, err := os.ReadFile(ppm)
	if err != nil {
		t.Fatal(err)
	}
	header := fmt.Appendf(nil, "P6\n%d %d\n255\n", img.w, img.h)
	if img.mode != "RGB" || !bytes.HasPrefix(want, header) || !bytes.Equal(img.pix, want[len(header):]) {
		t.Errorf("openImage of a %dx%d JPEG: mode %s, pixels differ from djpeg's", img.w, img.h, img.mode)
	}
}

// TestToolStderrPastItsBound: a tool that writes more than the 64 KiB of
// stderr kept for error messages runs on: the excess is dropped, not
// turned into a broken pipe that would kill the tool (here the shell,
// before it prints "ok").
func TestToolStderrPastItsBound(t *testing.T) {
	needTools(t, "sh")
	out, err := runTool(context.Background(), "sh", "-c", `printf "%0100000d" 0 >&2; echo ok`)
	if err != nil || string(out) != "ok\n" {
		t.Errorf("runTool with 100000 bytes of stderr = %.100q, %.100v; want \"ok\\n\"", out, err)
	}
}

// zipPart is data repeated n times.
type zipPart struct {
	data string
	n    int
}

// zipEntry is an archive entry made of its parts in turn.
type zipEntry struct {
	name  string
	parts []zipPart
}

// writeZip writes a zip of deflated entries. Each part is deflated once
// and its stream, ended by a sync flush, copied n times: deflate streams
// so ended can follow one another, so an entry of hundreds of MiB takes
// a few kB and no time to make.
func writeZip(t *testing.T, path string, entries []zipEntry) string {
	t.Helper()
	var final bytes.Buffer
	fw, _ := flate.NewWriter(&final, flate.BestCompression)
	fw.Close() // an empty last block
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	for _, e := range entries {
		var raw bytes.Buffer
		var crc uint32
		size := 0
		for _, p := range e.parts {
			var d bytes.Buffer
			fw, _ := flate.NewWriter(&d, flate.BestCompression)
			fw.Write([]byte(p.data))
			fw.Flush()
			for range p.n {
				raw.Write(d.Bytes())
				crc = crc32.Update(crc, crc32.IEEETable, []byte(p.data))
			}
			size += len(p.data) * p.n
		}
		raw.Write(final.Bytes())
		w, err := zw.CreateRaw(&zip.FileHeader{Name: e.name, Method: zip.Deflate, CRC32: crc,
			CompressedSize64: uint64(raw.Len()), UncompressedSize64: uint64(size)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(raw.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEPUBOverCap: compare_epub does not score an EPUB over one of its
// caps, which OSWorld's zipfile and lxml read whole: an error wrapping
// metric.ErrOverCap names the cap. The caps are the 64 MiB read of the
// file, 32 MiB inflated for one entry, 128 MiB for all the entries read,
// and 2^22 tokens for one page (which scored 0: the parser's error was
// taken for lxml's). A file of exactly 64 MiB, and an entry of exactly 32
// MiB, are compared. (The other sides of the last two caps would take 8 s
// or more under the race detector.)
func TestEPUBOverCap(t *testing.T) {
	dir := t.TempDir()
	files := book("uuid-1", chapter("One", "It begins.", "It goes on."), chapter("Two", "The end."))
	gold := writeEPUB(t, dir, "gold.epub", files)
	data, err := os.ReadFile(gold)
	if err != nil {
		t.Fatal(err)
	}
	// The book after zeros up to size: a zip with data before it, which
	// zipfile reads as Go's archive/zip does (a sparse file: no write).
	padded := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(data, size-int64(len(data))); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The book with its parts, and toc.ncx replaced by toc.
	entries := func(toc []zipPart, extra ...zipEntry) []zipEntry {
		var es []zipEntry
		for _, f := range files {
			if f[0] == "toc.ncx" {
				es = append(es, zipEntry{f[0], toc})
				continue
			}
			es = append(es, zipEntry{f[0], []zipPart{{f[1], 1}}})
		}
		return append(es, extra...)
	}
	mib := zipPart{strings.Repeat("x", 1<<20-1) + "\n", 1}
	lines := func(n int) zipPart { p := mib; p.n = n; return p }
	tocOver := writeZip(t, filepath.Join(dir, "toc-over.epub"), entries([]zipPart{lines(32), {"x", 1}}))
	tocAt := writeZip(t, filepath.Join(dir, "toc-at.epub"), entries([]zipPart{lines(32)}))
	// toc.ncx and content.opf of 32 MiB, then pages of 32 MiB, a few
	// bytes and 32 MiB: the last read passes 128 MiB. The pages are
	// paragraphs of 1 KiB, nothing lxml bounds.
	para := zipPart{"<p>" + strings.Repeat("a", 1017) + "</p>", 32 << 10}
	total := writeZip(t, filepath.Join(dir, "total.epub"), []zipEntry{
		{"toc.ncx", []zipPart{lines(32)}}, {"content.opf", []zipPart{lines(32)}},
		{"a.html", []zipPart{para}}, {"b.html", []zipPart{{"<p>b</p>", 1}}}, {"c.html", []zipPart{para}},
	})
	// 2^22 stray end tags, which libxml2 skips, after the four tags
	// before them.
	tokens := writeZip(t, filepath.Join(dir, "tokens.epub"), entries([]zipPart{{files[2][1], 1}}, zipEntry{"chapter9.html",
		[]zipPart{{"<html><head></head><body>", 1}, {strings.Repeat("</x>", 1<<12), 1 << 10}, {"</body></html>", 1}}}))
	const fileText = "over 67108864 bytes"
	runCapCases(t, []capCase{
		{"file over 64 MiB, result", "compare_epub", padded("over.epub", metric.MaxFile+1), gold, fileText, 0},
		{"file over 64 MiB, expected", "compare_epub", gold, padded("over.epub", metric.MaxFile+1), fileText, 0},
		{"file of 64 MiB", "compare_epub", padded("at.epub", metric.MaxFile), gold, "", 1},
		{"entry over 32 MiB", "compare_epub", tocOver, gold, "toc.ncx inflates past 33554432 bytes", 0},
		{"entry of 32 MiB", "compare_epub", tocAt, tocAt, "", 1},
		{"entries over 128 MiB", "compare_epub", total, gold, "unpacks past 134217728 bytes", 0},
		{"page over 2^22 tokens", "compare_epub", tokens, gold, "html of more than 4194304 tokens", 0},
	})
}
