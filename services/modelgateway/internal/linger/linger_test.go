package linger

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// serveOnce accepts one connection from l, reads n bytes of what the
// client sends, answers "refused", marks the connection to be drained if
// drain is set, and closes it.
func serveOnce(t *testing.T, l *Listener, n int, drain bool) {
	t.Helper()
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
			t.Error(err)
		}
		if _, err := c.Write([]byte("refused")); err != nil {
			t.Error(err)
		}
		if drain && !Drain(c) {
			t.Error("Drain: the listener's connection was not recognised")
		}
		c.Close()
	}()
}

func listen(t *testing.T, max int, wait time.Duration) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(ln, max, wait)
	t.Cleanup(func() { l.Close() })
	return l
}

// writeThenRead sends body whole and then reads the answer to the end, as
// a client that writes its request before it reads (OpenAI's Python
// client) does.
func writeThenRead(t *testing.T, addr string, body []byte) (string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(body); err != nil {
		return "", err
	}
	got, err := io.ReadAll(c)
	return string(got), err
}

// TestDrainedCloseLetsTheClientRead: the server reads 1 KiB of a 16 MiB
// body and answers; drained, the client's write completes and it reads
// the answer. Closed plainly, the unread data makes the close a reset and
// the client's write (or its read) fails: the case the package exists for.
func TestDrainedCloseLetsTheClientRead(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 16<<20)
	tests := []struct {
		name    string
		drain   bool
		wantErr bool
	}{
		{"drained", true, false},
		{"closed plainly", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := listen(t, 4, 5*time.Second)
			serveOnce(t, l, 1<<10, tt.drain)
			got, err := writeThenRead(t, l.Addr().String(), body)
			if tt.wantErr {
				if err == nil && got == "refused" {
					t.Fatalf("plain close: the client read the answer; the drained case tests nothing")
				}
				return
			}
			if err != nil || got != "refused" {
				t.Fatalf("client read %q, %v; want the answer and EOF", got, err)
			}
		})
	}
}

// TestDrainIsBounded: a client that keeps its side open is cut off after
// the listener's wait, and the slot it held is free again; with no slot
// free a marked connection closes at once.
func TestDrainIsBounded(t *testing.T) {
	l := listen(t, 1, 200*time.Millisecond)
	serveOnce(t, l, 1, true)
	c := dialRefused(t, l.Addr().String())
	// The server still reads while draining: writes succeed until the
	// wait has passed and the socket is closed.
	start := time.Now()
	for time.Since(start) < 5*time.Second {
		if _, err := c.Write([]byte("more")); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d >= 5*time.Second {
		t.Errorf("writes failed after %v, want after the 200ms wait and well before 5s", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(l.slots) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(l.slots); n != 0 {
		t.Fatalf("%d slots held after the drain ended", n)
	}

	// No slot free: the marked connection is closed at once.
	l.slots <- struct{}{}
	defer func() { <-l.slots }()
	serveOnce(t, l, 1, true)
	c2 := dialRefused(t, l.Addr().String())
	start = time.Now()
	var werr error
	for time.Since(start) < 5*time.Second && werr == nil {
		_, werr = c2.Write([]byte("more"))
		time.Sleep(10 * time.Millisecond)
	}
	if werr == nil || time.Since(start) > time.Second {
		t.Errorf("write after the close: %v after %v, want an error at once", werr, time.Since(start))
	}
}

// TestDrainOtherConn: Drain of a connection that no Listener made reports
// false and changes nothing.
func TestDrainOtherConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Drain(a) {
		t.Fatal("Drain(net.Pipe) = true, want false")
	}
}

// dialRefused sends a request to a server of serveOnce and reads its
// answer up to the server's FIN; the connection stays open for writes.
func dialRefused(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Write([]byte("x"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := io.ReadAll(c); err != nil || string(got) != "refused" {
		t.Fatalf("read %q, %v; want the answer and EOF", got, err)
	}
	return c
}
