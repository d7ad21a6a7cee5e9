package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// easyKeys maps mutagen's EasyID3 keys to ID3v2.3/2.4 frame IDs, and the
// ID3v2.2 IDs that mutagen upgrades to them.
var (
	easyKeys = map[string]string{
		"title": "TIT2", "artist": "TPE1", "album": "TALB", "albumartist": "TPE2",
		"composer": "TCOM", "genre": "TCON", "date": "TDRC", "tracknumber": "TRCK",
		"discnumber": "TPOS", "lyricist": "TEXT", "conductor": "TPE3", "version": "TIT3",
		"organization": "TPUB", "copyright": "TCOP", "encodedby": "TENC", "language": "TLAN",
		"bpm": "TBPM", "mood": "TMOO", "length": "TLEN", "media": "TMED", "isrc": "TSRC",
		"albumsort": "TSOA", "artistsort": "TSOP", "titlesort": "TSOT", "composersort": "TSOC",
		"albumartistsort": "TSO2", "originaldate": "TDOR", "discsubtitle": "TSST",
		"arranger": "TPE4", "author": "TOLY", "compilation": "TCMP", "website": "WOAR", "grouping": "TIT1",
	}
	v22IDs = map[string]string{
		"TT2": "TIT2", "TP1": "TPE1", "TAL": "TALB", "TP2": "TPE2", "TCM": "TCOM", "TCO": "TCON",
		"TYE": "TYER", "TRK": "TRCK", "TPA": "TPOS", "TXT": "TEXT", "TP3": "TPE3", "TT3": "TIT3",
		"TPB": "TPUB", "TCR": "TCOP", "TEN": "TENC", "TLA": "TLAN", "TBP": "TBPM", "TLE": "TLEN",
		"TMT": "TMED", "TRC": "TSRC", "TT1": "TIT1", "TOA": "TOPE", "WAR": "WOAR",
		"TDA": "TDAT", "TIM": "TIME", "TOR": "TORY",
	}
)

// maxTagBytes bounds the ID3v2 tag read from the head of a file; mutagen
// reads any size, so a larger tag is not scored (metric.ErrOverCap).
const maxTagBytes = 16 << 20

var errNoID3 = errors.New("no ID3 tag")

// id3Frames reads the text frames of an MP3's tags as mutagen's ID3 does:
// the ID3v2 tag at the start (v2.2 to v2.4, unsynchronisation undone),
// then ID3v1 fields at the end for frames v2 lacks. Each frame gives its
// values (a text frame may hold several, NUL-separated).
func id3Frames(path string) (map[string][]string, error) {
	f, err := boundedread.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return readID3(f, fi.Size())
}

// readID3 reads the tags of an MP3 of size bytes.
func readID3(r io.ReaderAt, size int64) (map[string][]string, error) {
	head := make([]byte, 10)
	frames := map[string][]string{}
	hasV2, hasV1 := false, false
	// The ID3v2 version ID3v1's year is read as (mutagen's v1v2_ver):
	// TDRC under a v2.4 tag, TYER otherwise, which upgradeFrames turns
	// into TDRC only if the tag has none.
	v1Year := "TYER"
	if _, err := r.ReadAt(head, 0); err == nil && string(head[:3]) == "ID3" && head[3] >= 2 && head[3] <= 4 {
		n := syncsafe(head[6:10])
		if n > maxTagBytes {
			return nil, fmt.Errorf("ID3 tag of %d bytes is over the cap of %d: %w", n, maxTagBytes, metric.ErrOverCap)
		}
		body := make([]byte, min(int64(n), max(size-10, 0)))
		got, _ := r.ReadAt(body, 10)
		parseID3v2(head[3], head[5], body[:got], frames)
		hasV2 = true
		if head[3] == 4 {
			v1Year = "TDRC"
		}
	}
	if size >= 128 {
		tail := make([]byte, 128)
		if _, err := r.ReadAt(tail, size-128); err == nil && string(tail[:3]) == "TAG" {
			for id, v := range parseID3v1(tail) {
				if id == "TDRC" {
					id = v1Year
				}
				if _, ok := frames[id]; !ok {
					frames[id] = []string{v}
				}
			}
			hasV1 = true
		}
	}
	if !hasV2 && !hasV1 {
		return nil, errNoID3
	}
	upgradeFrames(frames)
	return frames, nil
}

// upgradeFrames does what mutagen's update_to_v24 does on load to the
// frames EasyID3 reads: TYER, TDAT and TIME become TDRC timestamps
// ("1990" with "0305" and "1230" is 1990-05-03T12:30:00) unless the tag
// has a TDRC, and TORY becomes TDOR unless the tag has one.
func upgradeFrames(frames map[string][]string) {
	years, dates, times := frames["TYER"], frames["TDAT"], frames["TIME"]
	delete(frames, "TYER")
	delete(frames, "TDAT")
	delete(frames, "TIME")
	at := func(vs []string, i int) string {
		if i < len(vs) {
			return vs[i]
		}
		return ""
	}
	var stamps []string
	for i := range max(len(years), len(dates), len(times)) {
		y, d, t := at(years, i), at(dates, i), at(times, i)
		if !allASCIIDigits(y, 1) {
			continue
		}
		stamp := y
		if len(d) == 4 && allASCIIDigits(d, 4) {
			stamp += "-" + d[2:] + "-" + d[:2]
			if len(t) == 4 && allASCIIDigits(t, 4) {
				stamp += "T" + t[:2] + ":" + t[2:] + ":00"
			}
		}
		stamps = append(stamps, stamp)
	}
	if _, ok := frames["TDRC"]; !ok && len(stamps) > 0 {
		frames["TDRC"] = stamps
	}
	if tory, ok := frames["TORY"]; ok {
		delete(frames, "TORY")
		if _, ok := frames["TDOR"]; !ok {
			// The frame's text as str() gives it, values joined by NUL.
			frames["TDOR"] = []string{strings.Join(tory, "\x00")}
		}
	}
}

// allASCIIDigits reports whether s is at least min ASCII digits and
// nothing else.
func allASCIIDigits(s string, min int) bool {
	if len(s) < min {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func syncsafe(b []byte) int {
	return int(b[0]&0x7f)<<21 | int(b[1]&0x7f)<<14 | int(b[2]&0x7f)<<7 | int(b[3]&0x7f)
}

// unsync undoes ID3 unsynchronisation (0xFF 0x00 → 0xFF).
func unsync(b []byte) []byte { return bytes.ReplaceAll(b, []byte{0xff, 0x00}, []byte{0xff}) }

// parseID3v2 walks the frames of a tag body; a malformed frame ends the
// walk, keeping what came before, as mutagen does with padding.
func parseID3v2(version, flags byte, body []byte, frames map[string][]string) {
	if flags&0x80 != 0 && version < 4 {
		body = unsync(body)
	}
	if flags&0x40 != 0 && len(body) >= 4 {
		// Skip the extended header.
		var n int
		if version == 4 {
			n = syncsafe(body[:4])
		} else {
			n = int(binary.BigEndian.Uint32(body[:4])) + 4
		}
		if n < 0 || n > len(body) {
			return
		}
		body = body[n:]
	}
	idLen, hdrLen := 4, 10
	if version == 2 {
		idLen, hdrLen = 3, 6
	}
	for len(body) >= hdrLen {
		id := string(body[:idLen])
		if body[0] == 0 {
			return
		}
		var size int
		var fflags uint16
		switch version {
		case 2:
			size = int(body[3])<<16 | int(body[4])<<8 | int(body[5])
		case 3:
			size = int(binary.BigEndian.Uint32(body[4:8]))
			fflags = binary.BigEndian.Uint16(body[8:10])
		default:
			size = syncsafe(body[4:8])
			fflags = binary.BigEndian.Uint16(body[8:10])
		}
		if size < 0 || size > len(body)-hdrLen {
			return
		}
		data := body[hdrLen : hdrLen+size]
		body = body[hdrLen+size:]
		if version == 2 {
			up, ok := v22IDs[id]
			if !ok {
				continue
			}
			id = up
		}
		if (id[0] != 'T' || id == "TXXX") && id != "WOAR" {
			continue
		}
		if version == 4 {
			if fflags&0x0001 != 0 && len(data) >= 4 {
				// Data length indicator.
				data = data[4:]
			}
			if fflags&0x0002 != 0 {
				data = unsync(data)
			}
			if fflags&0x000c != 0 {
				// Compressed or encrypted: mutagen cannot read it either.
				continue
			}
		} else if version == 3 && fflags&0x00c0 != 0 {
			continue
		}
		if id == "WOAR" {
			// A URL frame: Latin-1 up to a NUL, no encoding byte. mutagen
			// keys these by their URL, so a repeated one is kept once.
			if i := bytes.IndexByte(data, 0); i >= 0 {
				data = data[:i]
			}
			if url := latin1(data); !slices.Contains(frames[id], url) {
				frames[id] = append(frames[id], url)
			}
			continue
		}
		if vals, ok := decodeText(data); ok {
			mergeTextFrame(frames, id, vals)
		}
	}
}

// mergeTextFrame adds a text frame's values. A first frame of its kind
// keeps them all; a later one adds each value its kind does not hold yet,
// as mutagen merges text frames on load (TextFrame._merge_frame): two
// title frames "A" and "B" read "A,B". Timestamps compare as mutagen's
// ID3TimeStamp does, by their normalized text.
func mergeTextFrame(frames map[string][]string, id string, vals []string) {
	have, ok := frames[id]
	if !ok {
		frames[id] = append([]string{}, vals...)
		return
	}
	same := func(a, b string) bool { return a == b }
	if timestampFrames[id] {
		same = func(a, b string) bool { return id3Timestamp(a) == id3Timestamp(b) }
	}
	for _, v := range vals {
		if !slices.ContainsFunc(have, func(h string) bool { return same(h, v) }) {
			have = append(have, v)
		}
	}
	frames[id] = have
}

// decodeText decodes a text frame: its encoding byte, then values
// separated by NUL in that encoding, without trailing empty ones.
func decodeText(data []byte) ([]string, bool) {
	if len(data) == 0 {
		return nil, false
	}
	enc, data := data[0], data[1:]
	var s string
	switch enc {
	case 0:
		s = latin1(data)
	case 3:
		s = strings.ToValidUTF8(string(data), "\uFFFD")
	case 1, 2:
		// UTF-16: each NUL-separated value carries its own byte order
		// mark (encoding 1) or is big-endian (encoding 2).
		var vals []string
		for start := 0; start < len(data); {
			end := start
			for end+1 < len(data) && (data[end] != 0 || data[end+1] != 0) {
				end += 2
			}
			if end+1 >= len(data) {
				end = len(data) &^ 1
				if end < start {
					end = start
				}
			}
			vals = append(vals, decodeUTF16(data[start:end], enc == 2))
			start = end + 2
		}
		s = strings.Join(vals, "\x00")
	default:
		return nil, false
	}
	vals := strings.Split(s, "\x00")
	for len(vals) > 1 && vals[len(vals)-1] == "" {
		vals = vals[:len(vals)-1]
	}
	return vals, true
}

// latin1 decodes Latin-1 bytes.
func latin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

// decodeUTF16 decodes one UTF-16 value, honouring a byte order mark.
func decodeUTF16(b []byte, big bool) string {
	if len(b) >= 2 && b[0] == 0xff && b[1] == 0xfe {
		b, big = b[2:], false
	} else if len(b) >= 2 && b[0] == 0xfe && b[1] == 0xff {
		b, big = b[2:], true
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		if big {
			u[i] = binary.BigEndian.Uint16(b[2*i:])
		} else {
			u[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
	}
	return string(utf16.Decode(u))
}

// parseID3v1 reads an ID3v1 tag as mutagen's ParseID3v1 does: each field
// up to its first NUL, stripped of ASCII whitespace (bytes.strip), in
// Latin-1; the track byte unless it is 0, or a space that ends a comment
// padded with spaces; the genre byte as a number unless it is 255.
func parseID3v1(tag []byte) map[string]string {
	field := func(b []byte) string {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return latin1(bytes.Trim(b, " \t\n\r\v\f"))
	}
	out := map[string]string{}
	for id, v := range map[string]string{
		"TIT2": field(tag[3:33]), "TPE1": field(tag[33:63]), "TALB": field(tag[63:93]), "TDRC": field(tag[93:97]),
	} {
		if v != "" {
			out[id] = v
		}
	}
	if t := tag[126]; t != 0 && (t != ' ' || tag[125] == 0) {
		out["TRCK"] = fmt.Sprint(t)
	}
	if g := tag[127]; g != 255 {
		out["TCON"] = fmt.Sprint(g)
	}
	return out
}

// easyValue is what check_mp3_meta reads for an EasyID3 key: its values
// joined with ",", or "" when the tag has none (or the key is unknown).
func easyValue(frames map[string][]string, key string) string {
	id, known := easyKeys[key]
	if !known {
		return ""
	}
	vals := frames[id]
	switch {
	case key == "genre":
		// EasyID3 gives TCON's genres, not its text.
		vals = tconGenres(vals)
	case timestampFrames[id]:
		stamps := make([]string, len(vals))
		for i, v := range vals {
			stamps[i] = id3Timestamp(v)
		}
		vals = stamps
	}
	return strings.Join(vals, ",")
}

// metricMP3Meta is others.py's check_mp3_meta: for each rule key (an
// EasyID3 key), the tag's values joined with "," ("" when absent) match
// the rule (_match_value_to_rule). A file without an ID3 tag raises in
// mutagen and scores 0.
func metricMP3Meta(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	rules, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	p, ok := result.(string)
	if !ok {
		return 0, nil
	}
	if _, err := os.Stat(p); err != nil {
		return 0, nil
	}
	frames, err := id3Frames(p)
	if err != nil {
		return 0, metric.OverCap(err)
	}
	for key, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return 0, fmt.Errorf("check_mp3_meta: rule for %q is not an object", key)
		}
		ok, err := metric.MatchValueToRule(easyValue(frames, key), rule)
		if err != nil {
			return 0, metric.RuleErr(err)
		}
		if !ok {
			return 0, nil
		}
	}
	return 1, nil
}
