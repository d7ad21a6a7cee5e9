package py

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py/sandboxtest"
)

func TestRunLimits(t *testing.T) {
	sandboxtest.Need(t)
	lim := Limits{Timeout: 3 * time.Second, CPUSeconds: 2, MemoryBytes: 256 << 20, OutputBytes: 1000}
	py := New(Config{}).cfg.Python
	tests := []struct {
		name       string
		code       string
		wantOK     bool
		wantOutput string
		wantError  string
		cpuOnly    bool // a long wall clock, so only the CPU limit can end it
	}{
		{name: "prints", code: "print(6 * 7)", wantOK: true, wantOutput: "42"},
		{name: "exception", code: "raise ValueError('boom')", wantOutput: "ValueError: boom", wantError: "exit status 1"},
		{name: "no network", code: "import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('1.1.1.1', 80))", wantOutput: "OSError", wantError: "exit status 1"},
		{name: "cpu limit", code: "while True: pass", wantError: "killed by killed", cpuOnly: true},
		{name: "wall clock", code: "import time\ntime.sleep(30)", wantError: "timed out after 3s"},
		{name: "memory", code: "x = bytearray(1 << 30)", wantOutput: "MemoryError", wantError: "exit status 1"},
		{name: "output capped", code: "print('x' * 5000)", wantOK: true, wantOutput: "bytes of output dropped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := lim
			if tt.cpuOnly {
				l.Timeout, l.CPUSeconds = 60*time.Second, 1
			}
			res, err := Run(context.Background(), py, tt.code, l)
			if err != nil {
				t.Fatalf("Run(%q): %v", tt.code, err)
			}
			if res.OK != tt.wantOK || !strings.Contains(res.Output, tt.wantOutput) || !strings.Contains(res.Error, tt.wantError) {
				t.Errorf("Run(%q) = ok %v output %q error %q; want ok %v, output containing %q, error containing %q",
					tt.code, res.OK, res.Output, res.Error, tt.wantOK, tt.wantOutput, tt.wantError)
			}
		})
	}
}
