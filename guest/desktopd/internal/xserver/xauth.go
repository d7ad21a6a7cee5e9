package xserver

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Xvfb with -ac lets every local user connect to the display: watch the
// screen, type into a terminal and so run commands as desktopd's user,
// which the guest token is there to prevent. The displays desktopd starts
// require a MIT-MAGIC-COOKIE-1 instead, kept in a file only desktopd's
// user reads and named by XAUTHORITY, which desktopd's own X connection
// (xgb reads it) and every child it starts (through its environment)
// use.
//
// One cookie file serves every display of the process (tests start
// several desktops in one process, and XAUTHORITY is process-wide); its
// entry matches any display. It is removed when the last display stops.
var xauth struct {
	mu      sync.Mutex
	users   int
	dir     string
	file    string
	prev    string
	hadPrev bool
}

// acquireAuth returns the cookie file, creating it and pointing
// XAUTHORITY at it for the first display.
func acquireAuth() (string, error) {
	xauth.mu.Lock()
	defer xauth.mu.Unlock()
	if xauth.users == 0 {
		dir, err := os.MkdirTemp("", "desktopd-xauth-")
		if err != nil {
			return "", fmt.Errorf("X authority: %w", err)
		}
		cookie := make([]byte, 16)
		if _, err := rand.Read(cookie); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("X authority cookie: %w", err)
		}
		file := filepath.Join(dir, "Xauthority")
		if err := os.WriteFile(file, authEntry(cookie), 0o600); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("X authority: %w", err)
		}
		xauth.prev, xauth.hadPrev = os.LookupEnv("XAUTHORITY")
		os.Setenv("XAUTHORITY", file)
		xauth.dir, xauth.file = dir, file
	}
	xauth.users++
	return xauth.file, nil
}

// releaseAuth removes the cookie file after the last display stopped.
func releaseAuth() {
	xauth.mu.Lock()
	defer xauth.mu.Unlock()
	if xauth.users == 0 {
		return
	}
	xauth.users--
	if xauth.users > 0 {
		return
	}
	os.RemoveAll(xauth.dir)
	if xauth.hadPrev {
		os.Setenv("XAUTHORITY", xauth.prev)
	} else {
		os.Unsetenv("XAUTHORITY")
	}
	xauth.dir, xauth.file = "", ""
}

// authEntry is one Xauthority record (libXau's format): family
// FamilyWild with an empty address and display number, so that it matches
// every display, then the cookie.
func authEntry(cookie []byte) []byte {
	const familyWild = 0xffff
	var b []byte
	b = binary.BigEndian.AppendUint16(b, familyWild)
	for _, field := range [][]byte{nil, nil, []byte("MIT-MAGIC-COOKIE-1"), cookie} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(field)))
		b = append(b, field...)
	}
	return b
}
