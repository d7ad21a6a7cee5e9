// Package procinfo reads what the local providers (process, qemu) need to
// know about the processes they start from /proc, and the end of their logs
// for error messages. Linux only, as those providers are.
package procinfo

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself
	// hold parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

// Cmdline is pid's command line with its arguments joined by spaces, or ""
// when the process is gone.
func Cmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// Tail returns the last 400 bytes of a log file, trimmed, for an error
// message; "" when it cannot be read.
func Tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 400 {
		f.Seek(-400, io.SeekEnd)
	}
	b, _ := io.ReadAll(io.LimitReader(f, 400))
	return strings.TrimSpace(string(b))
}
