package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEpisodeSecretFiles checks that `runner episode` takes its tokens from
// files (--guest-token-file, --auth-token-file), and refuses what is not a
// usable secret file before it does anything else.
func TestEpisodeSecretFiles(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	if err := os.WriteFile(tok, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "guest token and its file", args: []string{"--guest-token", "x", "--guest-token-file", tok}, wantErr: "not both"},
		{name: "auth token file is a device", args: []string{"--auth-token-file", "/dev/zero"}, wantErr: "not a regular file"},
		{name: "guest token file is missing", args: []string{"--guest-token-file", filepath.Join(dir, "nope")}, wantErr: "no such file"},
		// A good file gets as far as the missing --task.
		{name: "good file", args: []string{"--guest-token-file", tok}, wantErr: "--task is required"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		err := Episode(context.Background(), tt.args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: Episode(%q) = %v, want an error containing %q", tt.name, tt.args, err, tt.wantErr)
		}
	}
}
