package media

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ffmpegMP3 encodes a one-second tone with ffmpeg's ID3 writer.
func ffmpegMP3(t *testing.T, name string, args ...string) string {
	t.Helper()
	needTools(t, "ffmpeg")
	p := filepath.Join(t.TempDir(), name)
	base := []string{"-loglevel", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=1"}
	run(t, "ffmpeg", append(append(base, args...), p)...)
	return p
}

func TestMP3Meta(t *testing.T) {
	v4 := ffmpegMP3(t, "v4.mp3", "-metadata", "title=Missing You", "-metadata", "artist=Cheng Xiang")
	// ID3v2.3 from ffmpeg stores non-Latin-1 text as UTF-16 with a BOM.
	v3 := ffmpegMP3(t, "v3.mp3", "-id3v2_version", "3", "-metadata", "title=Nights in Shanghai 夜上海", "-metadata", "artist=Zhou Xuan")
	none := ffmpegMP3(t, "none.mp3", "-id3v2_version", "0")
	// An ID3v1 tag only: mutagen falls back to it.
	audio, err := os.ReadFile(none)
	if err != nil {
		t.Fatal(err)
	}
	v1 := filepath.Join(t.TempDir(), "v1.mp3")
	tag := append([]byte("TAG"), pad("Red Daughter", 30)...)
	tag = append(tag, pad("Chen Shaohua", 30)...)
	tag = append(tag, pad("Album", 30)...)
	tag = append(append(tag, "1990"...), make([]byte, 30)...)
	tag = append(tag, 255)
	if err := os.WriteFile(v1, append(audio, tag...), 0o644); err != nil {
		t.Fatal(err)
	}
	eq := func(v string) map[string]any { return map[string]any{"method": "eq", "ref": v} }
	tests := []struct {
		name  string
		file  any
		rules map[string]any
		want  float64
	}{
		{"v2.4 title and artist", v4, map[string]any{"title": eq("Missing You"), "artist": eq("Cheng Xiang")}, 1},
		{"v2.4 wrong artist", v4, map[string]any{"title": eq("Missing You"), "artist": eq("Han Baoyi")}, 0},
		{"v2.3 UTF-16", v3, map[string]any{"title": eq("Nights in Shanghai 夜上海"), "artist": eq("Zhou Xuan")}, 1},
		{"regex", v3, map[string]any{"title": map[string]any{"method": "re.I", "ref": "^nights"}}, 1},
		{"absent key is empty", v4, map[string]any{"album": eq("")}, 1},
		{"v1 only", v1, map[string]any{"title": eq("Red Daughter"), "artist": eq("Chen Shaohua"), "date": eq("1990")}, 1},
		{"no tag raises", none, map[string]any{"title": eq("")}, 0},
		{"missing file", filepath.Join(t.TempDir(), "x.mp3"), map[string]any{"title": eq("")}, 0},
		{"nil", nil, map[string]any{"title": eq("")}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricMP3Meta(context.Background(), tt.file, tt.rules, true, nil)
			if err != nil || got != tt.want {
				t.Errorf("check_mp3_meta got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestMP3MetaRepeatedFrames: a tag with two title frames reads as both
// titles joined ("A,B"), each value once, as mutagen merges repeated text
// frames on load and EasyID3's values are joined with ",". The last frame
// alone was read ("B").
func TestMP3MetaRepeatedFrames(t *testing.T) {
	none := ffmpegMP3(t, "none.mp3", "-id3v2_version", "0")
	audio, err := os.ReadFile(none)
	if err != nil {
		t.Fatal(err)
	}
	// An ID3v2.4 tag of UTF-8 title frames "A", "B", "A".
	var frames []byte
	for _, title := range []string{"A", "B", "A"} {
		data := append([]byte{3}, title...)
		frames = append(frames, "TIT2"...)
		frames = append(frames, 0, 0, 0, byte(len(data)), 0, 0)
		frames = append(frames, data...)
	}
	tag := append([]byte("ID3\x04\x00\x00\x00\x00\x00"), byte(len(frames)))
	p := filepath.Join(t.TempDir(), "two-titles.mp3")
	if err := os.WriteFile(p, slices.Concat(tag, frames, audio), 0o644); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]float64{"A,B": 1, "B": 0, "A": 0} {
		got, err := metricMP3Meta(context.Background(), p, map[string]any{"title": map[string]any{"method": "eq", "ref": ref}}, true, nil)
		if err != nil || got != want {
			t.Errorf("check_mp3_meta(title eq %q) = %v, %v; want %v", ref, got, err, want)
		}
	}
}

// TestMP3MetaRuleThatCannotRun: a rule's pattern that backtracks past
// pyre.MatchTimeout fails the evaluation (it scored 0); re on a tag the
// file lacks still scores 0.
func TestMP3MetaRuleThatCannotRun(t *testing.T) {
	p := ffmpegMP3(t, "long.mp3", "-metadata", "title="+strings.Repeat("a", 40)+"!")
	got, err := metricMP3Meta(context.Background(), p, map[string]any{"title": map[string]any{"method": "re", "ref": `^(a+)+$`}}, true, nil)
	if err == nil || !strings.Contains(err.Error(), "match timeout") {
		t.Errorf("check_mp3_meta with a pattern past its timeout = %v, %v; want an evaluation failure", got, err)
	}
	got, err = metricMP3Meta(context.Background(), p, map[string]any{"title": map[string]any{"method": "re", "ref": `^b`}}, true, nil)
	if err != nil || got != 0 {
		t.Errorf("check_mp3_meta with a pattern that does not match = %v, %v; want 0, nil", got, err)
	}
}

func pad(s string, n int) []byte {
	b := make([]byte, n)
	copy(b, s)
	return b
}

func TestReadTextFrame(t *testing.T) {
	tests := []struct {
		name    string
		version byte
		data    []byte
		want    []string // nil: mutagen drops the frame
	}{
		{"latin-1", 4, []byte("\x00caf\xe9"), []string{"café"}},
		{"utf-8 values", 4, []byte("\x03a\x00b\x00"), []string{"a", "b"}},
		{"v2.4: a NUL after the terminator is one more value", 4, []byte("\x03a\x00\x00"), []string{"a", ""}},
		{"v2.3: NULs after a value are padding", 3, []byte("\x00a\x00\x00\x00"), []string{"a"}},
		{"v2.3: an empty value before another is kept", 3, []byte("\x00a\x00\x00b"), []string{"a", "", "b"}},
		{"utf-16 BOMs", 4, []byte("\x01\xff\xfea\x00\x00\x00\xfe\xff\x00b"), []string{"a", "b"}},
		{"utf-16 without a BOM is little-endian", 4, []byte("\x01a\x00\x00\x00b\x00"), []string{"a", "b"}},
		{"utf-16be keeps a BOM as a character", 4, []byte("\x02\xfe\xff\x00h\x00i"), []string{"\ufeffhi"}},
		{"odd utf-16 gets its missing NUL byte", 4, []byte("\x01\xff\xfea\x00b"), []string{"ab"}},
		{"surrogate pair", 4, []byte("\x01\xff\xfe\x3d\xd8\x00\xde"), []string{"\U0001f600"}},
		{"lone surrogate", 4, []byte("\x01\xff\xfea\x00\x00\xd8b\x00"), nil},
		{"invalid utf-8", 4, []byte("\x03a\xffb"), nil},
		{"unknown encoding", 4, []byte("\x05a"), nil},
		{"no text after the encoding", 4, []byte("\x03"), nil},
	}
	for _, tt := range tests {
		got, ok := readTextFrame(tt.version, tt.data)
		if ok != (tt.want != nil) || !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, %v; want %q", tt.name, got, ok, tt.want)
		}
	}
}

// FuzzMP3Tags feeds arbitrary bytes to the ID3 reader: it must not panic,
// loop or allocate past its caps.
func FuzzMP3Tags(f *testing.F) {
	f.Add([]byte("ID3\x04\x00\x00\x00\x00\x00\x15TIT2\x00\x00\x00\x0b\x00\x00\x03Missing You"))
	f.Add([]byte("ID3\x03\x80\x00\x00\x00\x00\x10TPE1\x00\x00\x00\x05\x00\x00\x01\xff\xfe"))
	f.Add([]byte("ID3\x02\x40\x00\x7f\x7f\x7f\x7fTT2\xff\xff\xff"))
	f.Add(append(make([]byte, 10), append([]byte("TAG"), make([]byte, 125)...)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, err := readID3(bytes.NewReader(data), int64(len(data)))
		if err == nil && frames == nil {
			t.Fatal("no error and no frames")
		}
	})
}
