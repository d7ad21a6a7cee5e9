package media

import (
	"encoding/json"
	"fmt"
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
	python := "/usr/bin/python3"
	if exec.Command(python, "-c", "import mutagen.easyid3").Run() != nil {
		const msg = "no /usr/bin/python3 with mutagen (python3-mutagen)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
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
	}
	dir := t.TempDir()
	var paths []string
	for i, c := range cases {
		file := slices.Concat(c.v2, audio, c.v1)
		p := filepath.Join(dir, fmt.Sprintf("%d.mp3", i))
		if err := os.WriteFile(p, file, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	keys := []string{"genre", "website", "title", "tracknumber", "date", "originaldate", "grouping"}
	const script = `
import json, sys
from mutagen.easyid3 import EasyID3
keys = json.loads(sys.argv[1])
out = []
for p in sys.argv[2:]:
    e = EasyID3(p)
    row = {}
    for k in keys:
        v = e.get(k, "")
        row[k] = ",".join(v) if isinstance(v, list) else v
    out.append(row)
json.dump(out, sys.stdout)
`
	keysJSON, _ := json.Marshal(keys)
	out, err := exec.Command(python, append([]string{"-c", script, string(keysJSON)}, paths...)...).Output()
	if err != nil {
		t.Fatalf("mutagen: %v", err)
	}
	var want []map[string]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		frames, err := id3Frames(paths[i])
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for _, k := range keys {
			if got := easyValue(frames, k); got != want[i][k] {
				t.Errorf("%s: %s = %q, mutagen's %q", c.name, k, got, want[i][k])
			}
		}
	}
}
