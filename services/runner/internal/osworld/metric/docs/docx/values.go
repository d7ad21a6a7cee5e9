package docx

import (
	"math"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// The readers below convert attribute values as python-docx's simple types
// do, with Python's int() and float(). Each returns raises = true where
// python-docx raises on the value, so that a metric reading the property
// fails as OSWorld's would. A number Python would hold but int64 cannot
// (past maxMeasure EMU) counts as raising.

// maxMeasure bounds a length in EMU (about 32 million km).
const maxMeasure = 1 << 60

// onOff reads an ST_OnOff property element (CT_OnOff.val): nil when
// absent, true when it has no w:val; a value other than 1, 0, true, false,
// on or off raises.
func onOff(n *node) (v *bool, raises bool) {
	if n == nil {
		return nil, false
	}
	s, ok := n.attr(nsW, "val")
	if !ok {
		b := true
		return &b, false
	}
	switch s {
	case "1", "true", "on":
		b := true
		return &b, false
	case "0", "false", "off":
		b := false
		return &b, false
	}
	return nil, true
}

// decimalNumber reads an ST_DecimalNumber w:val (a required int()),
// bounded to ±4096 so that a span cannot blow up a grid.
func decimalNumber(n *node) (v int, raises bool) {
	s, ok := n.attr(nsW, "val")
	if !ok {
		return 0, true
	}
	k, err := metric.PyInt(s, 10)
	if err != nil {
		return 0, true
	}
	return int(max(min(k, 1<<12), -1<<12)), false
}

// signedTwips reads an ST_SignedTwipsMeasure attribute in EMU: a
// universal measure when the text has an i, m or p, else
// int(round(float(text))) twips. nil when absent.
func signedTwips(n *node, name string) (v *int64, raises bool) {
	s, ok := n.attr(nsW, name)
	if !ok {
		return nil, false
	}
	if strings.ContainsAny(s, "imp") {
		return universal(s)
	}
	f, err := metric.PyFloat(s)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > maxMeasure/emuPerTwip {
		return nil, true
	}
	e := int64(math.RoundToEven(f)) * emuPerTwip
	return &e, false
}

// twips reads an ST_TwipsMeasure attribute in EMU: a universal measure
// when the text has an i, m or p, else int(text) twips. nil when absent.
func twips(n *node, name string) (v *int64, raises bool) {
	s, ok := n.attr(nsW, name)
	if !ok {
		return nil, false
	}
	if strings.ContainsAny(s, "imp") {
		return universal(s)
	}
	k, err := metric.PyInt(s, 10)
	if err != nil || k > maxMeasure/emuPerTwip || k < -maxMeasure/emuPerTwip {
		return nil, true
	}
	e := k * emuPerTwip
	return &e, false
}

// halfPoints reads ST_HpsMeasure in EMU: a universal measure when the
// text has an m, n or p, else Pt(int(text) / 2.0).
func halfPoints(s string) (v *int64, raises bool) {
	if strings.ContainsAny(s, "mnp") {
		return universal(s)
	}
	k, err := metric.PyInt(s, 10)
	if err != nil || k > maxMeasure/emuPerPt || k < -maxMeasure/emuPerPt {
		return nil, true
	}
	e := int64(float64(k) / 2.0 * emuPerPt)
	return &e, false
}

// universal reads ST_UniversalMeasure ("12pt", "2.5cm") in EMU: the last
// two characters name the unit, the rest is float()'s.
func universal(s string) (v *int64, raises bool) {
	r := []rune(s)
	if len(r) < 2 {
		return nil, true
	}
	mult := map[string]float64{"mm": 36000, "cm": 360000, "in": 914400, "pt": 12700, "pc": 152400, "pi": 152400}[string(r[len(r)-2:])]
	q, err := metric.PyFloat(string(r[:len(r)-2]))
	if mult == 0 || err != nil {
		return nil, true
	}
	f := math.RoundToEven(q * mult)
	if math.IsNaN(f) || math.Abs(f) > maxMeasure {
		return nil, true
	}
	e := int64(f)
	return &e, false
}

// parseRGB reads ST_HexColor as RGBColor.from_string does: int(text[:2],
// 16), int(text[2:4], 16) and int(text[4:], 16), each of which must be
// 0-255 ("0000001" is 00 00 01, " FF0000" is 0F F0 00).
func parseRGB(s string) (v *RGB, raises bool) {
	r := []rune(s)
	var c RGB
	for i, part := range [][]rune{r[:min(2, len(r))], r[min(2, len(r)):min(4, len(r))], r[min(4, len(r)):]} {
		k, err := metric.PyInt(string(part), 16)
		if err != nil || k < 0 || k > 255 {
			return nil, true
		}
		c[i] = uint8(k)
	}
	return &c, false
}
