package media

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// id3Tag is an ID3v2 tag (version 2, 3 or 4, no flags) of the given frames,
// each an ID and its raw data.
func id3Tag(version byte, frames ...[2]string) []byte {
	var body []byte
	for _, f := range frames {
		id, data := f[0], f[1]
		body = append(body, id...)
		n := len(data)
		switch version {
		case 2:
			body = append(body, byte(n>>16), byte(n>>8), byte(n))
		case 3:
			body = append(body, byte(n>>24), byte(n>>16), byte(n>>8), byte(n), 0, 0)
		default:
			body = append(body, byte(n>>21&0x7f), byte(n>>14&0x7f), byte(n>>7&0x7f), byte(n&0x7f), 0, 0)
		}
		body = append(body, data...)
	}
	n := len(body)
	head := []byte{'I', 'D', '3', version, 0, 0, byte(n >> 21 & 0x7f), byte(n >> 14 & 0x7f), byte(n >> 7 & 0x7f), byte(n & 0x7f)}
	return append(head, body...)
}

// id3v1Tag is a 128-byte ID3v1 tag of the year 1990; comment is 29 bytes,
// then the track and genre bytes.
func id3v1Tag(title, comment string, track, genre byte) []byte {
	tag := append([]byte("TAG"), pad(title, 30)...)
	tag = append(tag, pad("", 60)...)
	tag = append(tag, "1990"...)
	tag = append(tag, pad(comment, 29)...)
	return append(tag, track, genre)
}

// utf8Text is a text frame's data in UTF-8 (encoding 3).
func utf8Text(values ...string) string { return "\x03" + strings.Join(values, "\x00") }

// TestMP3MetaMatchesMutagen writes tags with the genre, URL and ID3v1
// forms that mutagen reads in its own way and compares what
// check_mp3_meta reads for each key with what mutagen's EasyID3 gives
// (Debian's python3-mutagen under /usr/bin/python3). Without it the test
// fails in CI and is skipped elsewhere.
func TestMP3MetaMatchesMutagen(t *testing.T) {
	python := mutagenPython(t)
	every := make([]string, 0, 260)
	for n := range 260 {
		every = append(every, strconv.Itoa(n))
	}
	audio := make([]byte, 4096)
	cases := []struct {
		name   string
		v2, v1 []byte
	}{
		{"every genre number", id3Tag(4, [2]string{"TCON", utf8Text(every...)}), nil},
		{"references and names", id3Tag(4, [2]string{"TCON", utf8Text("(17)", "(17)Rock", "(17)(RX)Remix", "(13)Pop", "(CR)(RX)", "(999)x", "(abc)x", "()", "((foo)", "(17")}), nil},
		{"words and numbers", id3Tag(4, [2]string{"TCON", utf8Text("Rock", "CR", "RX", "0017", "300", "255", "191", "192", "Rock\nPop", "\nRock", "", "Synthpop")}), nil},
		{"genres read on load and again by EasyID3", id3Tag(4, [2]string{"TCON", utf8Text("(13)17", "((17)", "(RX)13", "(0)(CR)")}), nil},
		{"genre frames merged", id3Tag(3, [2]string{"TCON", "\x0017"}, [2]string{"TCON", "\x00Rock"}, [2]string{"TCON", "\x00(17)"}), nil},
		{"urls", id3Tag(4, [2]string{"WOAR", "http://a.example/"}, [2]string{"WOAR", "http://b.example/\x00junk"},
			[2]string{"WOAR", "http://a.example/"}, [2]string{"WOAR", "http://caf\xe9.example/"}, [2]string{"TIT2", utf8Text("T")}), nil},
		{"v2.2", id3Tag(2, [2]string{"TCO", "\x00(8)Jazz"}, [2]string{"WAR", "http://v22.example/"}, [2]string{"TT2", "\x00Title"}), nil},
		{"v1 genre and track", nil, id3v1Tag("Song\xa0", "comment", 7, 17)},
		{"v1 space-padded comment", nil, id3v1Tag("  Song\t", strings.Repeat(" ", 29), ' ', 255)},
		{"v1 track 32 after a NUL", nil, id3v1Tag("Song", "short", ' ', 80)},
		// ID3v1.0: the comment's last byte where v1.1 keeps the track.
		{"v1.0 comment over the track byte", nil, id3v1Tag("Song", strings.Repeat("c", 29), 'x', 255)},
		{"v2.3 year, date and time", id3Tag(3, [2]string{"TYER", "\x001990"}, [2]string{"TDAT", "\x000305"}, [2]string{"TIME", "\x001230"}), nil},
		{"v2.3 year alone", id3Tag(3, [2]string{"TYER", "\x001990"}), nil},
		{"v2.4 timestamps", id3Tag(4, [2]string{"TDRC", utf8Text("2004-05-06 12:30", "abc", "1990-13", "2001-02-03T04:05:06", "19", " 1999")}), nil},
		{"v2.4 odd timestamps", id3Tag(4, [2]string{"TDRC", utf8Text("1_990-5", "+1990", "1990\u00a005", "1990--05", "2000/1/2", "1990.07", "00000001990")}), nil},
		{"equal timestamps merged", id3Tag(4, [2]string{"TDRC", utf8Text("2001-02-03T04:05")}, [2]string{"TDRC", utf8Text("2001-02-03 04:05", "2002")}), nil},
		{"TDRC wins over TYER", id3Tag(4, [2]string{"TYER", utf8Text("1980")}, [2]string{"TDRC", utf8Text("1990")}), nil},
		{"years, dates and times paired", id3Tag(3, [2]string{"TYER", "\x001990\x001991\x00x"}, [2]string{"TDAT", "\x000305\x00305"}, [2]string{"TIME", "\x001230"}), nil},
		{"original year", id3Tag(3, [2]string{"TORY", "\x001970"}), nil},
		{"original date wins", id3Tag(4, [2]string{"TORY", utf8Text("1970")}, [2]string{"TDOR", utf8Text("1971-01")}), nil},
		{"v2.2 year and date", id3Tag(2, [2]string{"TYE", "\x001995"}, [2]string{"TDA", "\x001112"}, [2]string{"TOR", "\x001960"}), nil},
		{"repeated value in one frame", id3Tag(4, [2]string{"TIT2", utf8Text("A", "A", "B")}, [2]string{"TIT2", utf8Text("B", "C", "C")}), nil},
		{"grouping", id3Tag(4, [2]string{"TIT1", utf8Text("Group")}), nil},
		{"v1 year under a bad v2.3 year", id3Tag(3, [2]string{"TYER", "\x00abc"}), id3v1Tag("Song", "", 0, 255)},
		{"v1 year under v2.4", id3Tag(4, [2]string{"TIT2", utf8Text("V2")}), id3v1Tag("Song", "", 0, 255)},
		{"v1 under v2", id3Tag(4, [2]string{"TIT2", utf8Text("V2")}), id3v1Tag("V1", "", 3, 13)},
		{"user-defined text", id3Tag(4, [2]string{"TXXX", utf8Text("ASIN", "x", "y")}, [2]string{"TXXX", utf8Text("ASIN", "y", "z")},
			[2]string{"TXXX", utf8Text("asin", "lower")}, [2]string{"TXXX", utf8Text("ALBUMARTISTSORT", "S")}, [2]string{"TSO2", utf8Text("T")}), nil},
		{"user-defined text without values", id3Tag(4, [2]string{"TXXX", utf8Text("ASIN")}, [2]string{"TXXX", "\x03ASIN\x00"}), nil},
		{"musician credits", id3Tag(4, [2]string{"TMCL", utf8Text("guitar", "Bob", "bass", "Al", "guitar", "Cy", "", "Nobody", "Guitar")}), nil},
		{"a later credits frame replaces", id3Tag(3, [2]string{"TMCL", "\x00guitar\x00Bob"}, [2]string{"TMCL", "\x00guitar\x00Cy"}), nil},
		{"musicbrainz track id", id3Tag(4, [2]string{"UFID", "http://musicbrainz.org\x00abc-123"}, [2]string{"UFID", "http://other.example\x00zzz"}), nil},
		{"non-ASCII track id", id3Tag(4, [2]string{"UFID", "http://musicbrainz.org\x00ab\xffc"}, [2]string{"TIT2", utf8Text("T")}), nil},
		{"replay gain", id3Tag(4, [2]string{"RVA2", "track\x00\x01\xfc\x00\x10\x80\x00"}, [2]string{"RVA2", "Track\x00\x01\x7f\xff\x03\xff"},
			[2]string{"RVA2", "\x00\x01\x80\x00\x20\x01\x02\x03\x04\x05"}), nil},
		{"replay gain without a peak", id3Tag(4, [2]string{"RVA2", "track\x00\x01\x01\x00"}, [2]string{"RVA2", "track\x00\x01\x01\x00\x18\x80"}), nil},
		{"replay gain of one byte", id3Tag(4, [2]string{"TIT2", utf8Text("T")}, [2]string{"RVA2", "track\x00\x01\x01"}), nil},
		{"v2.2 user-defined text and track id", id3Tag(2, [2]string{"TXX", "\x00ASIN\x00v22"}, [2]string{"UFI", "http://musicbrainz.org\x00id22"}, [2]string{"TS2", "\x00sort"}), nil},
		{"v2.4 NULs after the terminator", id3Tag(4, [2]string{"TIT2", "\x03A\x00\x00"}, [2]string{"TPE1", "\x01\xff\xfeA\x00\x00\x00\x00\x00\x00"}), nil},
		{"v2.3 NUL padding", id3Tag(3, [2]string{"TIT2", "\x00A\x00\x00"}, [2]string{"TPE1", "\x01\xff\xfeA\x00\x00\x00\x00\x00\x00"}), nil},
		{"undecodable frames dropped", id3Tag(4, [2]string{"TIT2", "\x03A\xffB"}, [2]string{"TIT2", utf8Text("B", "B")}, [2]string{"TPE1", "\x01\xff\xfeA\x00\x00\xd8"}), nil},
		{"utf-16 repairs", id3Tag(4, [2]string{"TIT2", "\x01A\x00B"}, [2]string{"TPE1", "\x02\x00A\x00B\x00\x00\x00C"}, [2]string{"TIT1", "\x01\xff\xfeA\x00\x00\x00\xfe\xffB\x00"}), nil},
		{"empty frames", id3Tag(4, [2]string{"TIT2", "\x03"}, [2]string{"TIT2", utf8Text("B", "B")}, [2]string{"WOAR", ""}, [2]string{"TPE1", "\x05A"}), nil},
	}
	files := make([][]byte, len(cases))
	names := make([]string, len(cases))
	for i, c := range cases {
		files[i] = slices.Concat(c.v2, audio, c.v1)
		names[i] = c.name
	}
	for _, msg := range compareWithMutagen(t, python, files, names, easyTestKeys) {
		t.Error(msg)
	}
}

// easyTestKeys are the EasyID3 keys the tests compare: each kind of
// getter, and keys in other cases.
var easyTestKeys = []string{
	"genre", "website", "title", "tracknumber", "date", "originaldate", "grouping", "artist",
	"albumartistsort", "asin", "musicbrainz_trackid", "performer:guitar", "Performer:Guitar", "performer:",
	"replaygain_track_gain", "replaygain_track_peak", "REPLAYGAIN_Track_gain", "replaygain__peak",
	"TITLE", "T\u0130TLE", "\u212aey", "nosuchkey",
}

// mutagenPython is /usr/bin/python3 when it has mutagen (Debian's
// python3-mutagen). Without it the test fails in CI and is skipped
// elsewhere.
func mutagenPython(t *testing.T) string {
	python := "/usr/bin/python3"
	if exec.Command(python, "-c", "import mutagen.easyid3").Run() != nil {
		const msg = "no /usr/bin/python3 with mutagen (python3-mutagen)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return python
}

// compareWithMutagen writes each file, reads keys from it with mutagen's
// EasyID3 as check_mp3_meta does (get with a default of ""), and returns
// a message for each file or key where our reader differs: a value, or
// where one side raises and the other does not.
func compareWithMutagen(t *testing.T, python string, files [][]byte, names, keys []string) []string {
	t.Helper()
	dir := t.TempDir()
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, fmt.Sprintf("%d.mp3", i))
		if err := os.WriteFile(paths[i], f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A row is null where loading the tag raises; a value is null where
	// reading the key raises.
	const script = `
import json, sys
from mutagen.easyid3 import EasyID3
keys = json.loads(sys.stdin.readline())
out = []
for p in sys.argv[1:]:
    try:
        e = EasyID3(p)
    except Exception:
        out.append(None)
        continue
    row = {}
    for k in keys:
        try:
            v = e.get(k, "")
            row[k] = ",".join(v) if isinstance(v, list) else v
        except Exception:
            row[k] = None
    out.append(row)
json.dump(out, sys.stdout)
`
	keysJSON, _ := json.Marshal(keys)
	cmd := exec.Command(python, append([]string{"-c", script}, paths...)...)
	cmd.Stdin = strings.NewReader(string(keysJSON) + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mutagen: %v", err)
	}
	var want []map[string]*string
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(files) {
		t.Fatalf("mutagen answered %d files of %d: %v", len(want), len(files), err)
	}
	var diffs []string
	for i, name := range names {
		frames, err := id3Frames(paths[i])
		raises := errors.Is(err, errMutagenRaises) || errors.Is(err, errNoID3)
		if (want[i] == nil) != raises || err != nil && !raises {
			diffs = append(diffs, fmt.Sprintf("%s: our reader: %v; mutagen raises: %v", name, err, want[i] == nil))
			continue
		}
		if want[i] == nil {
			continue
		}
		for _, k := range keys {
			got, err := easyValue(frames, k)
			switch w := want[i][k]; {
			case w == nil && err == nil:
				diffs = append(diffs, fmt.Sprintf("%s: %s = %q, mutagen raises", name, k, got))
			case w != nil && err != nil:
				diffs = append(diffs, fmt.Sprintf("%s: %s: %v, mutagen's %q", name, k, err, *w))
			case w != nil && got != *w:
				diffs = append(diffs, fmt.Sprintf("%s: %s = %q, mutagen's %q", name, k, got, *w))
			}
		}
	}
	return diffs
}

// TestID3MatchesMutagenOnRandomTags reads 3,000 random files with mutagen
// and with our reader and compares every key of easyTestKeys. Frames'
// bytes are drawn from pieces that the decoders treat apart (NULs, byte
// order marks, surrogates, bytes invalid in UTF-8, 0xFF, descriptions and
// roles that the keys name, short gain and peak fields), and the tags
// from the forms mutagen's loader treats apart: header and frame flags
// (unsynchronisation, an extended header, compression, encryption),
// sizes past the data or not syncsafe, v2.4 sizes written as plain
// integers, v2.2 names in v2.3 tags, and ID3v1 tags of 124 to 128 bytes,
// alone or under a v2 tag.
func TestID3MatchesMutagenOnRandomTags(t *testing.T) {
	python := mutagenPython(t)
	rng := rand.New(rand.NewPCG(5, 17))
	const n = 3000
	files := make([][]byte, n)
	names := make([]string, n)
	for i := range files {
		files[i] = randomMP3(rng)
		// The audio's frame headers repeat; the tags are what differs.
		names[i] = fmt.Sprintf("file %d %q", i, bytes.ReplaceAll(files[i], []byte{0xff, 0xfb, 0x90, 0x00}, []byte("<audio>")))
	}
	diffs := compareWithMutagen(t, python, files, names, easyTestKeys)
	for i, msg := range diffs {
		if i == 10 {
			t.Errorf("... and %d more", len(diffs)-10)
			break
		}
		t.Error(msg)
	}
}

// randomMP3 is a file of random tags for TestID3MatchesMutagenOnRandomTags.
func randomMP3(rng *rand.Rand) []byte {
	ids := map[byte][]string{
		2: {"TT2", "TP1", "TXX", "UFI", "WAR", "TCO", "TYE", "TS2", "TT1", "XYZ"},
		3: {"TIT2", "TPE1", "TXXX", "TMCL", "UFID", "RVA2", "WOAR", "TCON", "TYER", "TDAT", "TSO2", "TIT1", "TT2\x00", "COMM", "TABC"},
		4: {"TIT2", "TPE1", "TXXX", "TMCL", "UFID", "RVA2", "WOAR", "TCON", "TDRC", "TSO2", "TIT1", "TT2\x00", "COMM", "\x00IT2"},
	}
	pieces := []string{
		"A", "b", "\xe9", "\xc3\xa9", "\x00", "\x00\x00", "\xff\xfe", "\xfe\xff", "\x00\xd8", "\x00\xdc",
		"\x3d\xd8\x00\xde", "\xd8\x3d\xde\x00", "A\x00", "\x00A", "guitar", "Guitar", "track", "ASIN",
		"ALBUMARTISTSORT", "http://musicbrainz.org", "17", "(13)", "1990", "\x01", "\x10", "\x80", "\x7f\xff",
		"\xff", "\xff\x00", "\xff\xe0",
	}
	one := func(odds int) bool { return rng.IntN(odds) == 0 }
	pick := func(flags ...byte) byte {
		var f byte
		for _, b := range flags {
			if one(6) {
				f |= b
			}
		}
		return f
	}
	version := byte(2 + rng.IntN(3))
	plainSizes := version == 4 && one(8)
	var body []byte
	for range rng.IntN(5) {
		id := ids[version][rng.IntN(len(ids[version]))]
		var data []byte
		if one(8) == false {
			data = append(data, "\x00\x01\x02\x03\x05"[rng.IntN(5)])
		}
		for range rng.IntN(9) {
			data = append(data, pieces[rng.IntN(len(pieces))]...)
		}
		if one(5) {
			// Over 127 bytes, where syncsafe and plain sizes differ.
			data = append(data, bytes.Repeat([]byte("x"), 100+rng.IntN(200))...)
		}
		var fflags uint16
		if version == 3 {
			fflags = uint16(pick(0x80, 0x40, 0x20))
		} else if version == 4 {
			fflags = uint16(pick(0x01, 0x02, 0x04, 0x08, 0x40))
		}
		compress := version == 3 && fflags&0x80 != 0 || version == 4 && fflags&0x08 != 0
		if compress && !one(5) {
			var z bytes.Buffer
			w := zlib.NewWriter(&z)
			w.Write(data)
			w.Close()
			data = z.Bytes()
			if one(5) {
				data = data[:len(data)/2] // cut short
			}
		}
		if version == 3 && fflags&0x80 != 0 || version == 4 && fflags&0x09 != 0 && !one(5) {
			data = append([]byte{0, 0, 0, byte(len(data))}, data...)
		}
		size := len(data)
		switch {
		case one(10):
			size += 1 + rng.IntN(20) // past the data
		case one(20):
			size = 0
		}
		body = append(body, id...)
		switch {
		case version == 2:
			body = append(body, byte(size>>16), byte(size>>8), byte(size))
		case version == 3 || plainSizes:
			body = append(body, byte(size>>24), byte(size>>16), byte(size>>8), byte(size), byte(fflags>>8), byte(fflags))
		default:
			body = append(body, byte(size>>21&0x7f), byte(size>>14&0x7f), byte(size>>7&0x7f), byte(size&0x7f), byte(fflags>>8), byte(fflags))
		}
		body = append(body, data...)
	}
	var file []byte
	if !one(10) {
		flags := pick(0x80, 0x40, 0x20, 0x10, 0x01)
		if flags&0x40 != 0 {
			switch {
			case one(3): // the flag alone, a frame at once
			case version == 4:
				body = append([]byte{0, 0, 0, 6, 1, 0}, body...)
			default:
				body = append([]byte{0, 0, 0, 6, 0, 0, 0, 0, 0, 0}, body...)
			}
		}
		body = append(body, make([]byte, rng.IntN(3)*7)...) // padding
		size := len(body)
		if one(10) {
			size += rng.IntN(40) - 20
		}
		size = max(size, 0)
		file = append([]byte{'I', 'D', '3', version, 0, flags, byte(size >> 21 & 0x7f), byte(size >> 14 & 0x7f), byte(size >> 7 & 0x7f), byte(size & 0x7f)}, body...)
		if one(20) {
			file[6] |= 0x80 // size not syncsafe
		}
	}
	file = append(file, bytes.Repeat([]byte{0xff, 0xfb, 0x90, 0x00}, 16)...)
	if one(3) {
		tag := []byte("TAG")
		for _, field := range []int{30, 30, 30} {
			tag = append(tag, pad(pieces[rng.IntN(len(pieces))], field)...)
		}
		tag = append(tag, pad("1990", 4-rng.IntN(5))...)
		tag = append(tag, pad(strings.Repeat(" ", rng.IntN(30)), 29)...)
		tag = append(tag, byte(rng.IntN(3)*16), byte(rng.IntN(256)))
		if one(10) {
			file = append(file, "APETAGEX"[:5]...)
		}
		file = append(file, tag...)
		file = append(file, make([]byte, rng.IntN(4))...)
	}
	return file
}
