package slots

import "testing"

func TestSet(t *testing.T) {
	s := New(2)
	steps := []struct {
		name   string
		do     func() (int, bool)
		want   int
		wantOK bool
	}{
		{"claim first", func() (int, bool) { return s.Claim("a") }, 0, true},
		{"claim second", func() (int, bool) { return s.Claim("b") }, 1, true},
		{"claim when full", func() (int, bool) { return s.Claim("c") }, 0, false},
		{"take a held slot", func() (int, bool) { return 0, s.Take(0, "c") }, 0, false},
		{"take out of range", func() (int, bool) { return 2, s.Take(2, "c") }, 2, false},
		{"release then claim", func() (int, bool) { s.Release("a"); return s.Claim("c") }, 0, true},
		{"release then take", func() (int, bool) { s.Release("b"); return 1, s.Take(1, "d") }, 1, true},
	}
	for _, st := range steps {
		got, ok := st.do()
		if got != st.want || ok != st.wantOK {
			t.Errorf("%s: got %d, %v; want %d, %v", st.name, got, ok, st.want, st.wantOK)
		}
	}
}
