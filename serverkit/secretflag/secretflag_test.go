package secretflag

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

func TestRegisterAndResolve(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "peer")
	if err := os.WriteFile(file, []byte("p33r\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{name: "file", args: []string{"--peer-token-file", file}, want: "p33r"},
		{name: "flag", args: []string{"--peer-token", "x"}, want: "x"},
		{name: "both", args: []string{"--peer-token", "x", "--peer-token-file", file}, wantErr: true},
		{name: "missing file", args: []string{"--peer-token-file", filepath.Join(dir, "nope")}, wantErr: true},
		{name: "fifo-like device", args: []string{"--peer-token-file", "/dev/null"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			token := fs.String("peer-token", "", "")
			fs.String("addr", "", "")
			files := Register(fs)
			if fs.Lookup("addr"+FileSuffix) != nil {
				t.Error("--addr-file registered for a flag that holds no secret")
			}
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := files.Resolve()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Resolve() = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && *token != tt.want {
				t.Errorf("--peer-token = %q, want %q", *token, tt.want)
			}
		})
	}
}
