package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGuestTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "guest-token")
	if err := os.WriteFile(file, []byte("g-t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := func(extra string) string {
		return "pools:\n  - name: a\n    provider: process\n    size: 1\n    process:\n" + extra
	}
	tests := []struct {
		name, yaml, want, wantErr string
	}{
		{name: "file", yaml: pool("      guest_token_file: " + file + "\n"), want: "g-t0ken"},
		{name: "same token in both", yaml: pool("      guest_token: g-t0ken\n      guest_token_file: " + file + "\n"), want: "g-t0ken"},
		{name: "different tokens", yaml: pool("      guest_token: other\n      guest_token_file: " + file + "\n"), wantErr: "pools[0].process.guest_token_file: set guest_token or guest_token_file, not both"},
		{name: "device", yaml: pool("      guest_token_file: /dev/zero\n"), wantErr: "pools[0].process.guest_token_file: /dev/zero: a character device"},
		{name: "missing", yaml: pool("      guest_token_file: " + file + ".nope\n"), wantErr: "pools[0].process.guest_token_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pools, err := Parse([]byte(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := pools[0].Process.GuestToken; got != tt.want {
				t.Errorf("guest token = %q, want %q", got, tt.want)
			}
			// Validating again (New validates pools it is given) still works.
			if err := Validate(pools); err != nil {
				t.Errorf("second Validate: %v", err)
			}
		})
	}
}
