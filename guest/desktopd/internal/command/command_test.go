package command

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{"echo hi", []string{"echo", "hi"}, false},
		{`ls -la "my dir" 'it''s'`, []string{"ls", "-la", "my dir", "its"}, false},
		{`a\ b "c\"d" e#f`, []string{"a b", `c"d`, "e#f"}, false},
		{`""`, []string{""}, false},
		{`"open`, nil, true},
		{`x\`, nil, true},
	}
	for _, tt := range tests {
		got, err := Split(tt.in)
		if (err != nil) != tt.err || !tt.err && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Split(%q) got %q, %v; want %q, err=%v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestArgv(t *testing.T) {
	r := &Runner{Home: "/home/u"}
	tests := []struct {
		cmd   any
		shell bool
		want  []string
	}{
		{[]string{"cat", "~/f.txt"}, false, []string{"cat", "/home/u/f.txt"}},
		{"echo 'a b'", false, []string{"echo", "a b"}},
		{"echo $HOME", true, []string{"/bin/sh", "-c", "echo $HOME"}},
		{[]string{"echo $0", "x"}, true, []string{"/bin/sh", "-c", "echo $0", "x"}},
	}
	for _, tt := range tests {
		got, err := r.Argv(tt.cmd, tt.shell)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Argv(%q, %v) got %q, %v; want %q", tt.cmd, tt.shell, got, err, tt.want)
		}
	}
	if _, err := r.Argv(42, false); err == nil {
		t.Error("Argv(42) succeeded, want error")
	}
}

func TestRun(t *testing.T) {
	r := &Runner{MaxOutput: 10}
	ctx := context.Background()
	res, err := r.Run(ctx, Spec{Argv: []string{"/bin/sh", "-c", "echo 0123456789abc; echo err >&2; exit 3"}})
	if err != nil || res.Code != 3 || res.Stderr != "err\n" || res.Stdout[:10] != "0123456789" {
		t.Errorf("Run got %+v, %v", res, err)
	}
	// The cap cuts "é" after its first byte: the raw output leaves the
	// character out whole and says what was dropped, and reads as text.
	res, err = r.Run(ctx, Spec{Argv: []string{"/bin/sh", "-c", "printf '012345678\303\251xy'"}})
	text, terr := PyText(res.RawStdout)
	if err != nil || terr != nil || text != "012345678\n[desktopd: 4 more bytes of output dropped]" {
		t.Errorf("cut output reads %q, %v, %v", text, err, terr)
	}
	start := time.Now()
	_, err = r.Run(ctx, Spec{Argv: []string{"/bin/sh", "-c", "sleep 30 & sleep 30"}, Timeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) || time.Since(start) > 5*time.Second {
		t.Errorf("timeout got %v after %v, want ErrTimeout quickly", err, time.Since(start))
	}
	// A background child holding stdout must not make Run wait for it.
	start = time.Now()
	res, err = r.Run(ctx, Spec{Argv: []string{"/bin/sh", "-c", "sleep 30 & echo bg"}})
	if err != nil || time.Since(start) > 5*time.Second || res.Stdout != "bg\n" {
		t.Errorf("background child: got %+v, %v after %v", res, err, time.Since(start))
	}
	if _, err := r.Run(ctx, Spec{Argv: []string{"/no/such/binary"}}); err == nil {
		t.Error("missing binary: want error")
	}
}

// TestExpandPath: request paths are expanded as OSWorld's server does,
// os.path.expandvars(os.path.expanduser(p)): a variable that is not set,
// and a "$" that names none, stay as written, so that a file whose name
// holds a "$" is the file the caller named.
func TestExpandPath(t *testing.T) {
	t.Setenv("DESKTOPD_TEST_DIR", "/data")
	r := &Runner{Home: "/home/u"}
	tests := []struct {
		in, want string
	}{
		{"~", "/home/u"},
		{"~/a.txt", "/home/u/a.txt"},
		{"$HOME/a.txt", "/home/u/a.txt"},
		{"${HOME}/a.txt", "/home/u/a.txt"},
		{"$DESKTOPD_TEST_DIR/x", "/data/x"},
		{"${DESKTOPD_TEST_DIR}x", "/datax"},
		{"~/report$DESKTOPD_TEST_UNSET.xlsx", "/home/u/report$DESKTOPD_TEST_UNSET.xlsx"},
		{"/tmp/${DESKTOPD_TEST_UNSET}/f", "/tmp/${DESKTOPD_TEST_UNSET}/f"},
		{"/tmp/price$$.txt", "/tmp/price$$.txt"},
		{"/tmp/a$1b", "/tmp/a$1b"},
		{"/tmp/a${b", "/tmp/a${b"},
		{"/tmp/a${}b", "/tmp/a${}b"},
		{"/tmp/a$", "/tmp/a$"},
		{"/tmp/a$-b", "/tmp/a$-b"},
	}
	for _, tt := range tests {
		if got := r.ExpandPath(tt.in); got != tt.want {
			t.Errorf("ExpandPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPyText(t *testing.T) {
	tests := []struct {
		in, want string
		err      string
	}{
		{"a\r\nb\rc\n", "a\nb\nc\n", ""},
		{"\r\r\n", "\n\n", ""},
		{"é€", "é€", ""},
		{"ok\xff", "", "can't decode byte 0xff in position 2: invalid start byte"},
		{"\xe2\x82x", "", "can't decode byte 0xe2 in position 0: invalid continuation byte"},
		{"a\xc3", "", "can't decode byte 0xc3 in position 1: unexpected end of data"},
	}
	for _, tt := range tests {
		got, err := PyText([]byte(tt.in))
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("PyText(%q) = %q, %v; want %q, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}
