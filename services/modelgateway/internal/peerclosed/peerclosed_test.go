package peerclosed

import (
	"net"
	"testing"
	"time"
)

func TestClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if Closed(server) {
		t.Fatal("open connection reported closed")
	}
	// Unread data is not a close, and peeking must not consume it.
	client.Write([]byte("x"))
	time.Sleep(10 * time.Millisecond)
	if Closed(server) {
		t.Fatal("connection with pending data reported closed")
	}
	var b [1]byte
	if n, err := server.Read(b[:]); n != 1 || err != nil {
		t.Fatalf("read after peek = %d, %v; want the byte", n, err)
	}
	client.Close()
	deadline := time.Now().Add(2 * time.Second)
	for !Closed(server) {
		if time.Now().After(deadline) {
			t.Fatal("closed peer not detected")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHungUpBehindUnreadData: a close that follows data the owner has not
// read (a TLS peer's close_notify) is seen by hungUp, not by peek.
func TestHungUpBehindUnreadData(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	check := func(f func(uintptr) bool) bool {
		var got bool
		rc, _ := server.(*net.TCPConn).SyscallConn()
		rc.Control(func(fd uintptr) { got = f(fd) })
		return got
	}
	client.Write([]byte("close_notify"))
	if check(hungUp) {
		t.Fatal("open connection with pending data reported hung up")
	}
	client.Close()
	deadline := time.Now().Add(2 * time.Second)
	for !check(hungUp) {
		if time.Now().After(deadline) {
			t.Fatal("close behind unread data not detected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if check(peek) {
		t.Error("peek saw the close behind unread data; hungUp would not be needed")
	}
}
