package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// TokenEnv is the environment variable desktopd takes its bearer token
// from. The environment, unlike argv, is readable only by the process's
// own user (and root) in /proc.
const TokenEnv = "DESKTOPD_TOKEN"

// maxTokenFile bounds a token file: a token is tens of bytes.
const maxTokenFile = 64 << 10

// ResolveToken picks the bearer token from, in order, --token (kept for
// guests started by hand; the mesh never uses it), --token-file and the
// environment. Giving both flags is an error.
func ResolveToken(flagToken, file, env string) (string, error) {
	switch {
	case flagToken != "" && file != "":
		return "", errors.New("set --token or --token-file, not both")
	case flagToken != "":
		return flagToken, nil
	case file != "":
		return readTokenFile(file)
	}
	return env, nil
}

// readTokenFile reads a token from a regular file of at most maxTokenFile
// bytes, without its trailing newline; the error never quotes the content.
func readTokenFile(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("--token-file: %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("--token-file: %s is over %d bytes", path, maxTokenFile)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(bytes.TrimSpace(b)) == 0 {
		return "", fmt.Errorf("--token-file: %s is empty", path)
	}
	return string(b), nil
}
