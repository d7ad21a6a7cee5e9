package api

import "testing"

func TestParseGVariantString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"'file:///home/user/bg.png'\n", "file:///home/user/bg.png"},
		{`'file:///home/user/it\'s.png'`, "file:///home/user/it's.png"},
		{`"file:///home/user/it's.png"`, "file:///home/user/it's.png"},
		{`'a\\b'`, `a\b`},
		{"''", ""},
		{"file:///x.png", "file:///x.png"},
		{"'unterminated", "unterminated"},
	} {
		if got := parseGVariantString(tc.in); got != tc.want {
			t.Errorf("parseGVariantString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
