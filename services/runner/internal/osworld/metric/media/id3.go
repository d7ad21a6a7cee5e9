package media

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// easyKeys maps mutagen's EasyID3 keys to the frames they read, by the
// key mutagen's ID3 stores a frame under (HashKey): a frame ID, or
// "TXXX:desc" and "UFID:owner" for keys EasyID3 registers on those
// frames. albumartistsort is registered twice, and the user-defined text
// frame, registered last, is the one EasyID3 reads.
var (
	easyKeys = map[string]string{
		"title": "TIT2", "artist": "TPE1", "album": "TALB", "albumartist": "TPE2",
		"composer": "TCOM", "genre": "TCON", "date": "TDRC", "tracknumber": "TRCK",
		"discnumber": "TPOS", "lyricist": "TEXT", "conductor": "TPE3", "version": "TIT3",
		"organization": "TPUB", "copyright": "TCOP", "encodedby": "TENC", "language": "TLAN",
		"bpm": "TBPM", "mood": "TMOO", "length": "TLEN", "media": "TMED", "isrc": "TSRC",
		"albumsort": "TSOA", "artistsort": "TSOP", "titlesort": "TSOT", "composersort": "TSOC",
		"originaldate": "TDOR", "discsubtitle": "TSST",
		"arranger": "TPE4", "author": "TOLY", "compilation": "TCMP", "website": "WOAR", "grouping": "TIT1",
		"musicbrainz_trackid":        "UFID:http://musicbrainz.org",
		"musicbrainz_artistid":       "TXXX:MusicBrainz Artist Id",
		"musicbrainz_albumid":        "TXXX:MusicBrainz Album Id",
		"musicbrainz_albumartistid":  "TXXX:MusicBrainz Album Artist Id",
		"musicbrainz_trmid":          "TXXX:MusicBrainz TRM Id",
		"musicip_puid":               "TXXX:MusicIP PUID",
		"musicip_fingerprint":        "TXXX:MusicMagic Fingerprint",
		"musicbrainz_albumstatus":    "TXXX:MusicBrainz Album Status",
		"musicbrainz_albumtype":      "TXXX:MusicBrainz Album Type",
		"releasecountry":             "TXXX:MusicBrainz Album Release Country",
		"musicbrainz_discid":         "TXXX:MusicBrainz Disc Id",
		"asin":                       "TXXX:ASIN",
		"albumartistsort":            "TXXX:ALBUMARTISTSORT",
		"performer":                  "TXXX:PERFORMER",
		"barcode":                    "TXXX:BARCODE",
		"catalognumber":              "TXXX:CATALOGNUMBER",
		"musicbrainz_releasetrackid": "TXXX:MusicBrainz Release Track Id",
		"musicbrainz_releasegroupid": "TXXX:MusicBrainz Release Group Id",
		"musicbrainz_workid":         "TXXX:MusicBrainz Work Id",
		"acoustid_fingerprint":       "TXXX:Acoustid Fingerprint",
		"acoustid_id":                "TXXX:Acoustid Id",
	}
	v22IDs = map[string]string{
		"TT2": "TIT2", "TP1": "TPE1", "TAL": "TALB", "TP2": "TPE2", "TCM": "TCOM", "TCO": "TCON",
		"TYE": "TYER", "TRK": "TRCK", "TPA": "TPOS", "TXT": "TEXT", "TP3": "TPE3", "TT3": "TIT3",
		"TPB": "TPUB", "TCR": "TCOP", "TEN": "TENC", "TLA": "TLAN", "TBP": "TBPM", "TLE": "TLEN",
		"TMT": "TMED", "TRC": "TSRC", "TT1": "TIT1", "TOA": "TOPE", "WAR": "WOAR",
		"TDA": "TDAT", "TIM": "TIME", "TOR": "TORY", "TP4": "TPE4", "TCP": "TCMP", "TST": "TSOT",
		"TSA": "TSOA", "TS2": "TSO2", "TSP": "TSOP", "TSC": "TSOC", "TOL": "TOLY", "TXX": "TXXX", "UFI": "UFID",
	}
)

// knownFrames are the ID3v2.3/2.4 frame IDs mutagen 1.46 reads (its
// Frames): it skips frames of other names, and sizes up a v2.4 tag's
// frames and an extended header flag by how many of these they find.
var knownFrames = func() map[string]bool {
	ids := strings.Fields(`AENC APIC ASPI CHAP COMM COMR CTOC ENCR EQU2 ETCO GEOB GRID GRP1 IPLS LINK
		MCDI MLLT MVIN MVNM OWNE PCNT PCST POPM POSS PRIV RBUF RVA2 RVAD RVRB SEEK SIGN SYLT SYTC
		TALB TBPM TCAT TCMP TCOM TCON TCOP TDAT TDEN TDES TDLY TDOR TDRC TDRL TDTG TENC TEXT TFLT
		TGID TIME TIPL TIT1 TIT2 TIT3 TKEY TKWD TLAN TLEN TMCL TMED TMOO TOAL TOFN TOLY TOPE TORY
		TOWN TPE1 TPE2 TPE3 TPE4 TPOS TPRO TPUB TRCK TRDA TRSN TRSO TSIZ TSO2 TSOA TSOC TSOP TSOT
		TSRC TSSE TSST TXXX TYER UFID USER USLT WCOM WCOP WFED WOAF WOAR WOAS WORS WPAY WPUB WXXX`)
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set
}()

// maxTagBytes bounds the ID3v2 tag read from the head of a file; mutagen
// reads any size, so a larger tag is not scored (metric.ErrOverCap).
const maxTagBytes = 16 << 20

var errNoID3 = errors.New("no ID3 tag")

// id3Frames reads the frames EasyID3 reads from an MP3's tags as mutagen's
// ID3 does: the ID3v2 tag at the start (v2.2 to v2.4), then ID3v1 fields
// at the end for frames v2 lacks. Each frame gives its values (a text
// frame may hold several, NUL-separated), keyed as addFrame says.
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

// readID3 reads the tags of an MP3 of size bytes as mutagen's ID3.load
// does: the ID3v2 header (ID3Header), the frames after it, then an
// ID3v1 tag's fields for frames the v2 tag lacks, then the v2.4 upgrade.
// A header mutagen refuses raises in check_mp3_meta (errMutagenRaises).
func readID3(r io.ReaderAt, size int64) (map[string][]string, error) {
	frames := map[string][]string{}
	head := make([]byte, 10)
	n, _ := r.ReadAt(head, 0)
	// Without a v2 tag mutagen reads ID3v1's year as v2.4's TDRC; under
	// one, as TDRC under v2.4 and TYER under v2.2 and v2.3 (v1v2_ver).
	v1Year := "TDRC"
	hasV2 := n == 10 && string(head[:3]) == "ID3" && head[3] >= 2 && head[3] <= 4
	if hasV2 {
		version, flags := head[3], head[5]
		if !syncsafeBytes(head[6:10]) {
			return nil, fmt.Errorf("ID3 header's size is not syncsafe: %w", errMutagenRaises)
		}
		if version == 4 && flags&0x0f != 0 || version == 3 && flags&0x1f != 0 {
			return nil, fmt.Errorf("ID3v2.%d header flags %#02x: %w", version, flags, errMutagenRaises)
		}
		tagSize := int64(syncsafe(head[6:10]))
		pos := int64(10)
		if flags&0x40 != 0 {
			ext, err := readFull(r, pos, 4, size)
			if err != nil {
				return nil, err
			}
			switch {
			case knownFrames[string(ext)]:
				// The flag is set but a frame follows at once.
				flags &^= 0x40
			case version == 4:
				if !syncsafeBytes(ext) || syncsafe(ext) < 4 {
					return nil, fmt.Errorf("extended header size %x: %w", ext, errMutagenRaises)
				}
				pos += int64(syncsafe(ext))
			default:
				pos += 4 + int64(binary.BigEndian.Uint32(ext))
			}
		}
		if tagSize > maxTagBytes {
			return nil, fmt.Errorf("ID3 tag of %d bytes is over the cap of %d: %w", tagSize, maxTagBytes, metric.ErrOverCap)
		}
		// mutagen reads the tag's size from after the extended header.
		body, err := readFull(r, pos, tagSize, size)
		if err != nil {
			return nil, err
		}
		if err := readFrames(version, flags, body, frames); err != nil {
			return nil, err
		}
		if version != 4 {
			v1Year = "TYER"
		}
	}
	v1, ok, err := findID3v1(r, size)
	if err != nil {
		return nil, err
	}
	if !ok && !hasV2 {
		return nil, errNoID3
	}
	for id, v := range v1 {
		if id == "TDRC" {
			id = v1Year
		}
		if _, ok := frames[id]; !ok {
			frames[id] = []string{v}
		}
	}
	upgradeFrames(frames)
	return frames, nil
}

// readFull reads n bytes at off, or fails as mutagen's read_full does
// when the file ends first (an error that check_mp3_meta raises).
func readFull(r io.ReaderAt, off, n, size int64) ([]byte, error) {
	if off+n > size {
		return nil, fmt.Errorf("tag of %d bytes at %d past the end of a %d-byte file: %w", n, off, size, errMutagenRaises)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, off); err != nil && !(errors.Is(err, io.EOF) && off+n == size) {
		return nil, err
	}
	return b, nil
}

// syncsafeBytes reports whether no byte has its top bit set
// (BitPaddedInt.has_valid_padding).
func syncsafeBytes(b []byte) bool {
	for _, c := range b {
		if c&0x80 != 0 {
			return false
		}
	}
	return true
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

// readFrames walks a tag's frames as mutagen's read_frames does: after
// undoing a v2.2/v2.3 tag's unsynchronisation, frame after frame until
// the data ends or a name is all NULs; a frame past the end is read
// cut short; frames of size 0, with a non-ASCII name or one mutagen does
// not know are skipped. v2.4 frame sizes are syncsafe unless the tag reads
// better with plain integers (determine_bpi, for old iTunes tags).
func readFrames(version, flags byte, data []byte, frames map[string][]string) error {
	if version < 4 && flags&0x80 != 0 {
		if d, ok := pyUnsync(data); ok {
			data = d
		}
	}
	hdrLen := 10
	if version == 2 {
		hdrLen = 6
	}
	plainSizes := version == 4 && v24PlainSizes(data)
	for len(data) >= hdrLen {
		var name []byte
		var size int64
		var fflags uint16
		if version == 2 {
			name = data[:3]
			size = int64(data[3])<<16 | int64(data[4])<<8 | int64(data[5])
		} else {
			name = data[:4]
			size = int64(binary.BigEndian.Uint32(data[4:8]))
			fflags = binary.BigEndian.Uint16(data[8:10])
			if version == 4 && !plainSizes {
				size = int64(syncsafe(data[4:8]))
			}
		}
		if len(bytes.Trim(name, "\x00")) == 0 {
			break
		}
		end := int64(len(data))
		if int64(hdrLen)+size < end {
			end = int64(hdrLen) + size
		}
		frameData := data[hdrLen:end]
		data = data[end:]
		if size == 0 || !isASCII(string(name)) {
			continue
		}
		id := string(name)
		if version == 2 || id[3] == 0 {
			// v2.2 names, also written into v2.3 tags by some taggers.
			up, ok := v22IDs[strings.TrimSuffix(id, "\x00")]
			if !ok {
				continue
			}
			id = up
		}
		if !knownFrames[id] || id[0] != 'T' && id != "WOAR" && id != "UFID" && id != "RVA2" {
			continue
		}
		frameData, ok, err := unpackFrame(version, flags&0x80 != 0, fflags, frameData)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := addFrame(frames, version, id, frameData); err != nil {
			return err
		}
	}
	return nil
}

// unpackFrame undoes a frame's flags as Frame._fromData does: v2.4's data
// length indicator, unsynchronisation (the frame's or, in v2.4, the
// tag's) and zlib compression; v2.3's decompressed size and compression.
// ok is false for an encrypted frame, which mutagen does not read, and
// for one it finds junk.
func unpackFrame(version byte, tagUnsync bool, fflags uint16, data []byte) ([]byte, bool, error) {
	switch version {
	case 4:
		var dataLen []byte
		if fflags&0x0009 != 0 {
			dataLen = data[:min(4, len(data))]
			data = data[len(dataLen):]
		}
		if fflags&0x0002 != 0 || tagUnsync {
			if d, ok := pyUnsync(data); ok {
				data = d
			}
		}
		if fflags&0x0004 != 0 {
			return nil, false, nil
		}
		if fflags&0x0008 != 0 {
			d, err := inflate(data)
			if errors.Is(err, metric.ErrOverCap) {
				return nil, false, err
			}
			if err != nil {
				// mutagen 1.12 wrote no data length: try with it back.
				if d, err = inflate(slices.Concat(dataLen, data)); err != nil {
					return nil, false, metric.OverCap(err)
				}
			}
			data = d
		}
	case 3:
		if fflags&0x0080 != 0 {
			if len(data) < 4 {
				return nil, false, nil
			}
			data = data[4:]
		}
		if fflags&0x0040 != 0 {
			return nil, false, nil
		}
		if fflags&0x0080 != 0 {
			d, err := inflate(data)
			if err != nil {
				return nil, false, metric.OverCap(err)
			}
			data = d
		}
	}
	return data, true, nil
}

// inflate is zlib.decompress, capped at maxTagBytes: data after the end
// of the stream is ignored, a cut or corrupt stream is an error.
func inflate(data []byte) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	out, err := boundedread.ReadAll(zr, maxTagBytes)
	if errors.Is(err, boundedread.ErrTooLarge) {
		return nil, fmt.Errorf("compressed ID3 frame: %w: %w", err, metric.ErrOverCap)
	}
	return out, err
}

// pyUnsync undoes unsynchronisation as mutagen's unsynch.decode does:
// 0xFF 0x00 becomes 0xFF; data ending in 0xFF, or with 0xFF before
// another 0xFF or a byte from 0xE0, is refused (and mutagen then reads
// it as it is).
func pyUnsync(b []byte) ([]byte, bool) {
	if len(b) > 0 && b[len(b)-1] == 0xff {
		return nil, false
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		out = append(out, b[i])
		if b[i] != 0xff {
			continue
		}
		switch next := b[i+1]; {
		case next >= 0xe0:
			return nil, false
		case next == 0:
			i++
		}
	}
	return out, true
}

// v24PlainSizes is determine_bpi: whether a v2.4 tag's frame sizes read
// as plain integers find more known frames (or as many, and end the data
// where syncsafe ones do not) than syncsafe sizes, as old iTunes wrote.
func v24PlainSizes(data []byte) bool {
	walk := func(syncsafeSizes bool) (found int, off int64) {
		o, n := int64(0), int64(len(data))
		for o < n-10 {
			part := data[o : o+10]
			if len(bytes.Trim(part, "\x00")) == 0 {
				return found, -((n - o) % 10)
			}
			size := int64(binary.BigEndian.Uint32(part[4:8]))
			if syncsafeSizes {
				size = int64(syncsafe(part[4:8]))
			}
			o += 10 + size
			if name := string(part[:4]); isASCII(name) && knownFrames[name] {
				found++
			}
		}
		return found, o - n
	}
	asSyncsafe, syncsafeOff := walk(true)
	asPlain, plainOff := walk(false)
	return asPlain > asSyncsafe || asPlain == asSyncsafe && syncsafeOff >= 1 && plainOff <= 1
}

// errMutagenRaises is for a tag on which loading it in mutagen raises
// (an exception other than the junk-frame errors it skips frames on), so
// check_mp3_meta crashes: the file scores 0.
var errMutagenRaises = errors.New("mutagen raises on this tag")

// addFrame reads one frame into frames, keyed as mutagen keys it
// (HashKey): text frames by ID and user-defined ones as "TXXX:desc",
// merged as TextFrame._merge_frame does; WOAR as its URLs, each once; the
// musician credits (TMCL) as role, person, role, person...; "UFID:owner"
// as the identifier's raw bytes; "RVA2:desc" as EasyID3's gain and peak
// texts. A later frame of the last three kinds replaces an earlier one,
// as in mutagen. A frame mutagen finds junk is dropped.
func addFrame(frames map[string][]string, version byte, id string, data []byte) error {
	switch id {
	case "TXXX":
		if len(data) < 2 || data[0] > encUTF8 {
			return nil
		}
		desc, rest, ok := readEncodedText(version, data[0], data[1:])
		if !ok || len(rest) == 0 {
			return nil
		}
		if vals, ok := readTextValues(version, data[0], rest); ok {
			mergeTextFrame(frames, "TXXX:"+desc, vals)
		}
	case "TMCL":
		if people, ok := readPeople(version, data); ok {
			frames[id] = people
		}
	case "UFID":
		if len(data) == 0 {
			return nil
		}
		owner, rest := data, []byte(nil)
		if i := bytes.IndexByte(data, 0); i >= 0 {
			owner, rest = data[:i], data[i+1:]
		}
		frames["UFID:"+latin1(owner)] = []string{string(rest)}
	case "RVA2":
		return addRVA2(frames, data)
	case "WOAR":
		// A URL frame: Latin-1 up to a NUL, no encoding byte. mutagen
		// keys these by their URL, so a repeated one is kept once.
		if len(data) == 0 {
			return nil
		}
		if i := bytes.IndexByte(data, 0); i >= 0 {
			data = data[:i]
		}
		if url := latin1(data); !slices.Contains(frames[id], url) {
			frames[id] = append(frames[id], url)
		}
	default:
		if vals, ok := readTextFrame(version, data); ok {
			mergeTextFrame(frames, id, vals)
		}
	}
	return nil
}

// readPeople reads a paired text frame (TMCL): its encoding, then role
// and person values in turn; a role without a person pairs with "".
func readPeople(version byte, data []byte) ([]string, bool) {
	if len(data) < 2 || data[0] > encUTF8 {
		return nil, false
	}
	enc, data := data[0], data[1:]
	var people []string
	for len(data) > 0 {
		for range 2 {
			var v string
			var ok bool
			if v, data, ok = readEncodedText(version, enc, data); !ok {
				return nil, false
			}
			people = append(people, v)
		}
	}
	return people, true
}

// addRVA2 reads a relative volume adjustment frame as mutagen's RVA2
// specs do: a Latin-1 description, a channel byte, the first channel's
// gain (a signed 16-bit count of 1/512 dB) and its peak (a bit count,
// then up to 4 bytes of it). EasyID3 gives them as "%+f dB" and "%f".
func addRVA2(frames map[string][]string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	desc, rest := data, []byte(nil)
	if i := bytes.IndexByte(data, 0); i >= 0 {
		desc, rest = data[:i], data[i+1:]
	}
	if len(rest) < 2 {
		// No channel or no gain: a junk frame.
		return nil
	}
	rest = rest[1:]
	if len(rest) == 1 {
		// VolumeAdjustmentSpec unpacks two bytes unchecked: struct.error.
		return fmt.Errorf("RVA2 frame %q with a 1-byte gain: %w", latin1(desc), errMutagenRaises)
	}
	gain := float64(int16(binary.BigEndian.Uint16(rest))) / 512
	rest = rest[2:]
	if len(rest) == 0 {
		return nil
	}
	bits := int(rest[0])
	n := min(4, (bits+7)>>3)
	if n+1 > len(rest) {
		return nil
	}
	var peak uint64
	for _, b := range rest[1 : n+1] {
		peak = peak<<8 | uint64(b)
	}
	peak <<= ((8-bits&7)&7 + (4-n)*8)
	frames["RVA2:"+latin1(desc)] = []string{fmt.Sprintf("%+f dB", gain), fmt.Sprintf("%f", float64(peak)/(1<<31-1))}
	return nil
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

// latin1 decodes Latin-1 bytes.
func latin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

// findID3v1 finds an ID3v1 tag as mutagen's find_id3v1 does: the first
// "TAG" in the file's last 131 bytes starts one if 124 to 128 bytes are
// left from it (mutagen once wrote short years), and is not the end of an
// APEv2 tag's "APETAGEX".
func findID3v1(r io.ReaderAt, size int64) (map[string]string, bool, error) {
	start := max(size-131, 0)
	tail := make([]byte, size-start)
	if _, err := r.ReadAt(tail, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	idx := bytes.Index(tail, []byte("TAG"))
	if idx < 0 {
		return nil, false, nil
	}
	if ape := bytes.Index(tail, []byte("APETAGEX")); ape >= 0 && idx == ape+5 {
		return nil, false, nil
	}
	tag := tail[idx:]
	if len(tag) > 128 || len(tag) < 124 {
		return nil, false, nil
	}
	return parseID3v1(tag), true, nil
}

// parseID3v1 reads an ID3v1 tag of 124 to 128 bytes as mutagen's
// ParseID3v1 does: each field up to its first NUL, stripped of ASCII
// whitespace (bytes.strip), in Latin-1, the year as long as the tag lets
// it be; the track byte unless it is 0, or a space that ends a comment
// padded with spaces; the genre byte as a number unless it is 255.
func parseID3v1(tag []byte) map[string]string {
	field := func(b []byte) string {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return latin1(bytes.Trim(b, " \t\n\r\v\f"))
	}
	yearEnd := 93 + len(tag) - 124
	out := map[string]string{}
	for id, v := range map[string]string{
		"TIT2": field(tag[3:33]), "TPE1": field(tag[33:63]), "TALB": field(tag[63:93]), "TDRC": field(tag[93:yearEnd]),
	} {
		if v != "" {
			out[id] = v
		}
	}
	n := len(tag)
	if t := tag[n-2]; t != 0 && (t != ' ' || tag[n-3] == 0) {
		out["TRCK"] = fmt.Sprint(t)
	}
	if g := tag[n-1]; g != 255 {
		out["TCON"] = fmt.Sprint(g)
	}
	return out
}

// easyValue is what check_mp3_meta reads for a rule's key: EasyID3's
// values for it joined with ",", or "" where EasyID3 raises KeyError (no
// such frame, or no such key), which check_mp3_meta's get turns into "".
// EasyID3 looks a key up in lower case, then tries its glob keys
// ("performer:*", "replaygain_*_gain", "replaygain_*_peak"), whose
// getters read the role or description from the key as given. The error
// is for a getter that raises otherwise.
func easyValue(frames map[string][]string, key string) (string, error) {
	lower := metric.PyLower(key)
	var vals []string
	switch id, known := easyKeys[lower]; {
	case known && lower == "genre":
		// EasyID3 gives TCON's genres, not its text, and the text it
		// reads them from is already the genres: loading the tag
		// replaced it with them (ID3Tags.__update_common). So "(13)17"
		// reads Pop and 17 on load, then Pop and Rock.
		vals = tconGenres(tconGenres(frames[id]))
	case known && timestampFrames[id]:
		for _, v := range frames[id] {
			vals = append(vals, id3Timestamp(v))
		}
	case known && strings.HasPrefix(id, "UFID:"):
		if data, ok := frames[id]; ok && !isASCII(data[0]) {
			// data.decode('ascii') raises UnicodeDecodeError.
			return "", fmt.Errorf("musicbrainz_trackid is not ASCII: %w", errMutagenRaises)
		}
		vals = frames[id]
	case known:
		vals = frames[id]
	case strings.HasPrefix(lower, "performer:"):
		_, role, _ := strings.Cut(key, ":")
		people := frames["TMCL"]
		for i := 0; i+1 < len(people); i += 2 {
			if people[i] == role {
				vals = append(vals, people[i+1])
			}
		}
	case len(lower) >= 16 && strings.HasPrefix(lower, "replaygain_") && strings.HasSuffix(lower, "_gain"):
		if rva, ok := frames["RVA2:"+pySlice(key, 11, -5)]; ok {
			vals = rva[:1]
		}
	case len(lower) >= 16 && strings.HasPrefix(lower, "replaygain_") && strings.HasSuffix(lower, "_peak"):
		if rva, ok := frames["RVA2:"+pySlice(key, 11, -5)]; ok {
			vals = rva[1:]
		}
	}
	return strings.Join(vals, ","), nil
}

// pySlice is Python's s[from:end] for a negative end, over code points.
func pySlice(s string, from, end int) string {
	r := []rune(s)
	end += len(r)
	if from >= end {
		return ""
	}
	return string(r[from:end])
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// metricMP3Meta is others.py's check_mp3_meta: for each rule key (an
// EasyID3 key), the tag's values joined with "," ("" when absent) match
// the rule (_match_value_to_rule). A file without an ID3 tag, or one
// mutagen raises on, scores 0; so does a rule whose value raises, as
// check_mp3_meta reads every rule's value before the "and" that would
// skip a later match.
func metricMP3Meta(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
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
		return 0, metric.Because(ctx, err)
	}
	values := make(map[string]string, len(rules))
	for key := range rules {
		v, err := easyValue(frames, key)
		if err != nil {
			return 0, metric.Because(ctx, err)
		}
		values[key] = v
	}
	for key, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return 0, fmt.Errorf("check_mp3_meta: rule for %q is not an object", key)
		}
		ok, err := metric.MatchValueToRule(values[key], rule)
		if err != nil {
			return 0, metric.RuleErr(ctx, err)
		}
		if !ok {
			return 0, nil
		}
	}
	return 1, nil
}
