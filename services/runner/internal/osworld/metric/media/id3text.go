package media

import (
	"bytes"
	"unicode/utf8"
)

// The readers in this file decode ID3v2 text the way mutagen's specs do
// (mutagen/id3/_specs.py), since check_mp3_meta compares what mutagen
// reads: a value is a frame's text up to its terminator, decoded
// strictly. A value that does not decode makes mutagen drop the whole
// frame (ID3JunkFrameError), so each reader reports ok=false for it and
// the caller drops the frame too.

// ID3 text encodings (the byte that starts a text frame).
const (
	encLatin1  = 0
	encUTF16   = 1 // with a byte order mark; little-endian without one
	encUTF16BE = 2
	encUTF8    = 3
)

// readTextFrame is a text frame: its encoding byte, then its values. An
// unknown encoding, or nothing after it, makes the frame junk to mutagen.
func readTextFrame(version byte, data []byte) ([]string, bool) {
	if len(data) < 2 || data[0] > encUTF8 {
		return nil, false
	}
	return readTextValues(version, data[0], data[1:])
}

// readTextValues is a text frame's MultiSpec after its encoding byte:
// values read one after another until the data ends. ok is false when a
// value does not decode.
func readTextValues(version, enc byte, data []byte) (vals []string, ok bool) {
	for len(data) > 0 {
		var v string
		v, data, ok = readEncodedText(version, enc, data)
		if !ok {
			return nil, false
		}
		vals = append(vals, v)
	}
	return vals, true
}

// readEncodedText is EncodedTextSpec.read: one value and the data after
// its terminator. A value that fails to decode is tried again on
// iter_text_fixups's repairs (a missing last NUL byte, a missing UTF-16
// byte order mark). Before ID3v2.4 the rest counts as padding, and ends
// the frame, when it is all NUL bytes.
func readEncodedText(version, enc byte, data []byte) (string, []byte, bool) {
	tries := [][]byte{data}
	switch enc {
	case encUTF16BE:
		tries = append(tries, append(bytes.Clone(data), 0))
	case encUTF16:
		bom := []byte{0xff, 0xfe}
		tries = append(tries, append(bytes.Clone(data), 0), append(bytes.Clone(bom), data...), append(append(bytes.Clone(bom), data...), 0))
	}
	for _, try := range tries {
		v, rest, ok := decodeTerminated(enc, try)
		if !ok {
			continue
		}
		if version < 4 && len(bytes.Trim(rest, "\x00")) == 0 {
			rest = nil
		}
		return v, rest, true
	}
	return "", nil, false
}

// decodeTerminated is mutagen's decode_terminated with strict=False: the
// text up to the first NUL character and the bytes after it, or all of
// the data when there is no NUL. ok is false where Python's codec raises.
func decodeTerminated(enc byte, data []byte) (string, []byte, bool) {
	switch enc {
	case encLatin1, encUTF8:
		text, rest := data, []byte(nil)
		if i := bytes.IndexByte(data, 0); i >= 0 {
			text, rest = data[:i], data[i+1:]
		}
		if enc == encLatin1 {
			return latin1(text), rest, true
		}
		// Python's UTF-8 codec refuses what utf8.Valid refuses: bad
		// sequences, overlong forms and encoded surrogates.
		if !utf8.Valid(text) {
			return "", nil, false
		}
		return string(text), rest, true
	default:
		return decodeUTF16Terminated(enc == encUTF16BE, data)
	}
}

// decodeUTF16Terminated is decode_terminated's slow path for Python's
// "utf-16" codec (a byte order mark at the start sets the order, else
// little-endian) or "utf_16_be" (no mark is read): code units until a NUL
// one. A surrogate that is not part of a pair, or a unit cut short at the
// end, raises in Python.
func decodeUTF16Terminated(bigEndian bool, data []byte) (string, []byte, bool) {
	i := 0
	if !bigEndian && len(data) >= 2 {
		switch {
		case data[0] == 0xff && data[1] == 0xfe:
			i = 2
		case data[0] == 0xfe && data[1] == 0xff:
			i, bigEndian = 2, true
		}
	}
	unit := func(j int) rune {
		if bigEndian {
			return rune(data[j])<<8 | rune(data[j+1])
		}
		return rune(data[j+1])<<8 | rune(data[j])
	}
	var out []rune
	for ; i+1 < len(data); i += 2 {
		u := unit(i)
		switch {
		case u == 0:
			return string(out), data[i+2:], true
		case u >= 0xdc00 && u <= 0xdfff:
			return "", nil, false
		case u >= 0xd800 && u <= 0xdbff:
			if i+3 >= len(data) {
				return "", nil, false
			}
			lo := unit(i + 2)
			if lo < 0xdc00 || lo > 0xdfff {
				return "", nil, false
			}
			out = append(out, 0x10000+(u-0xd800)<<10+(lo-0xdc00))
			i += 2
		default:
			out = append(out, u)
		}
	}
	if i < len(data) {
		// An odd byte left over: "truncated data".
		return "", nil, false
	}
	return string(out), nil, true
}
