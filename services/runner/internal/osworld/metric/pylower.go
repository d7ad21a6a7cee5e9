package metric

import (
	"strings"
	"unicode"
)

// PyLower is Python's str.lower(): the simple lowercase mapping of each
// character, with Unicode's full mappings that apply in every language
// (U+0130 İ becomes "i̇", two characters) and the Final_Sigma rule: a Σ
// after a cased letter and not before one, case-ignorable characters
// skipped, becomes ς. strings.ToLower does neither, so "İ" and "ΣΑΣ"
// compared lowered differed from OSWorld's.
func PyLower(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r == 'İ' || r == 'Σ' }) {
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s) + 2)
	for i, r := range rs {
		switch r {
		case 'İ':
			b.WriteString("i\u0307")
		case 'Σ':
			if finalSigma(rs, i) {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma reports whether the Σ at rs[i] is in the Final_Sigma context
// \p{cased}\p{case-ignorable}* Σ !(\p{case-ignorable}* \p{cased}), as
// CPython's handle_capital_sigma checks it.
func finalSigma(rs []rune, i int) bool {
	j := i - 1
	for j >= 0 && caseIgnorable(rs[j]) {
		j--
	}
	if j < 0 || !cased(rs[j]) {
		return false
	}
	j = i + 1
	for j < len(rs) && caseIgnorable(rs[j]) {
		j++
	}
	return j == len(rs) || !cased(rs[j])
}

// cased is Unicode's Cased property: lowercase, uppercase or titlecase.
func cased(r rune) bool {
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase)
}

// caseIgnorable is Unicode's Case_Ignorable property: marks, format
// characters, modifier letters and symbols, and the characters that
// Word_Break calls MidLetter, MidNumLet or Single_Quote.
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', '\u00b7', '\u0387', '\u055f', '\u05f4', '\u2018', '\u2019', '\u2024', '\u2027',
		'\ufe13', '\ufe52', '\ufe55', '\uff07', '\uff0e', '\uff1a':
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}
