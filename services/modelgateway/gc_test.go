package modelgateway

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	tests := []struct {
		name      string
		selfGroup string // /proc/self/cgroup; "" = no file
		memoryMax string // memory.max of the group; "" = no file
		want      int64
		wantOK    bool
	}{
		{"container with a limit", "0::/\n", "2147483648\n", 2147483648, true},
		{"nested group", "0::/system.slice/gw.service\n", "536870912\n", 536870912, true},
		{"no limit", "0::/\n", "max\n", 0, false},
		{"cgroup v1", "4:memory:/docker/abc\n", "", 0, false},
		{"group without memory.max", "0::/\n", "", 0, false},
		{"no /proc", "", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if tt.selfGroup != "" {
				write(t, filepath.Join(root, "proc/self/cgroup"), tt.selfGroup)
			}
			if tt.memoryMax != "" {
				group := tt.selfGroup[len("0::") : len(tt.selfGroup)-1]
				write(t, filepath.Join(root, "sys/fs/cgroup", group, "memory.max"), tt.memoryMax)
			}
			got, ok := cgroupMemoryLimit(root)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("cgroupMemoryLimit() = %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
