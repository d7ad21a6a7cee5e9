package media

import (
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// timestampFrames are the frames mutagen reads as ID3TimeStamps, whose
// EasyID3 values ("date", "originaldate") are the normalized text.
var timestampFrames = map[string]bool{"TDRC": true, "TDOR": true}

// id3Timestamp is the text mutagen's ID3TimeStamp gives a value: it is
// split at "-", "T", ":", "/", "." and runs of whitespace into year,
// month, day, hour, minute and second; the parts are read as Python's
// int() reads them, up to the first that is no number; and they are
// written back as YYYY-MM-DD HH:MM:SS, the year zero-padded to four
// digits, the others to two. "2001-02-03T04:05:06" is "2001-02-03
// 04:05:06", "19" is "0019", "abc" is "". Python's int() also reads other
// scripts' digits; here only ASCII digits are numbers.
func id3Timestamp(v string) string {
	parts := splitTimestamp(v + ":::::")[:6]
	seps := "-- ::"
	var b strings.Builder
	for i, p := range parts {
		n, ok := pyIntText(p)
		if !ok {
			break
		}
		if i > 0 {
			b.WriteByte(seps[i-1])
		}
		width := 2
		if i == 0 {
			width = 4
		}
		if strings.HasPrefix(n, "-") {
			b.WriteString("-" + zeroPad(n[1:], width-1))
		} else {
			b.WriteString(zeroPad(n, width))
		}
	}
	return b.String()
}

// splitTimestamp is re.split('[-T:/.]|\s+', s).
func splitTimestamp(s string) []string {
	var out []string
	start := 0
	rs := []rune(s)
	for i := 0; i < len(rs); {
		switch r := rs[i]; {
		case strings.ContainsRune("-T:/.", r):
			out = append(out, string(rs[start:i]))
			i++
			start = i
		case metric.PyIsSpace(r):
			out = append(out, string(rs[start:i]))
			for i < len(rs) && metric.PyIsSpace(rs[i]) {
				i++
			}
			start = i
		default:
			i++
		}
	}
	return append(out, string(rs[start:]))
}

// pyIntText reads s as Python's int() reads a str of ASCII digits: an
// optional sign, then digits with single underscores between them. It
// returns the number in decimal without leading zeros.
func pyIntText(s string) (string, bool) {
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		if s[0] == '-' {
			sign = "-"
		}
		s = s[1:]
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return "", false
	}
	digits := strings.ReplaceAll(s, "_", "")
	if !allASCIIDigits(digits, 1) {
		return "", false
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", true
	}
	return sign + digits, true
}

// zeroPad left-pads digits with zeros to width, as %0Nd does.
func zeroPad(digits string, width int) string {
	if len(digits) >= width {
		return digits
	}
	return strings.Repeat("0", width-len(digits)) + digits
}
