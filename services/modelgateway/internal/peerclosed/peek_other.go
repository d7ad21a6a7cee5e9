//go:build !unix

package peerclosed

// peek cannot tell on this platform.
func peek(uintptr) bool { return false }
