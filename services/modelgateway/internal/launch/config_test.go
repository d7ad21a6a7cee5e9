package launch

import (
	"slices"
	"testing"
)

func TestArgv(t *testing.T) {
	vals := map[string]string{"{model}": "/ckpt/my model's", "{port}": "8001", "{host}": "127.0.0.1", "{name}": "m; rm -rf /"}
	tests := []struct {
		tmpl  string
		shell bool
		want  []string
	}{
		{"vllm serve {model} --port {port} --served-model-name {name}", false,
			[]string{"vllm", "serve", "/ckpt/my model's", "--port", "8001", "--served-model-name", "m; rm -rf /"}},
		{`srv --addr={host}:{port} --x 'a b' "c \"d\"" e\ f`, false,
			[]string{"srv", "--addr=127.0.0.1:8001", "--x", "a b", `c "d"`, "e f"}},
		{"srv {model} --port {port}", true,
			[]string{"/bin/sh", "-c", `srv '/ckpt/my model'\''s' --port '8001'`}},
	}
	for _, tt := range tests {
		got, err := Argv(tt.tmpl, tt.shell, vals)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Argv(%q) = %q, %v; want %q", tt.tmpl, got, err, tt.want)
		}
	}
	for _, bad := range []string{`a 'b`, `a "b`, `a \`, "   "} {
		if _, err := SplitWords(bad); err == nil {
			t.Errorf("SplitWords(%q) accepted", bad)
		}
	}
}

func TestParsePorts(t *testing.T) {
	tests := []struct {
		in     string
		lo, hi int
		ok     bool
	}{{"8001", 8001, 8001, true}, {"8001-8004", 8001, 8004, true}, {"0-3", 0, 0, false}, {"9-2", 0, 0, false}, {"a", 0, 0, false}, {"1-70000", 0, 0, false}}
	for _, tt := range tests {
		lo, hi, err := ParsePorts(tt.in)
		if (err == nil) != tt.ok || lo != tt.lo || hi != tt.hi {
			t.Errorf("ParsePorts(%q) = %d, %d, %v", tt.in, lo, hi, err)
		}
	}
}
