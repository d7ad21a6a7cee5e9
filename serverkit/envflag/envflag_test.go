package envflag

import (
	"flag"
	"testing"
)

func TestApply(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantN   int
		wantErr bool
	}{
		{name: "default", want: ":1", wantN: 1},
		{name: "env overrides default", env: map[string]string{"P_GRPC_ADDR": ":2"}, want: ":2", wantN: 1},
		{name: "flag beats env", args: []string{"--grpc-addr=:3"}, env: map[string]string{"P_GRPC_ADDR": ":2"}, want: ":3", wantN: 1},
		{name: "int from env", env: map[string]string{"P_SLOTS": "7"}, want: ":1", wantN: 7},
		{name: "bad int from env", env: map[string]string{"P_SLOTS": "x"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			addr := fs.String("grpc-addr", ":1", "")
			n := fs.Int("slots", 1, "")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := Apply(fs, "P_", func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if (err != nil) != tt.wantErr {
				t.Fatalf("Apply() error = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if *addr != tt.want || *n != tt.wantN {
				t.Errorf("got addr %q slots %d, want %q %d", *addr, *n, tt.want, tt.wantN)
			}
		})
	}
}

func TestName(t *testing.T) {
	if got, want := Name("ROLLOUTMESH_", "data-dir"), "ROLLOUTMESH_DATA_DIR"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
}
