package proctest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The kernel draws the local port of every outgoing connection, and of
// every listener on port 0, from its ephemeral range. A port a test learns
// by listening on "127.0.0.1:0" and closing is therefore free only until
// some connection, any test's, is given it: a child process that binds it
// a few hundred milliseconds later can fail with "address already in use".
// The functions below pick ports under that range, where nothing is
// handed out behind the test's back; a random pick keeps concurrent test
// processes (go test runs packages in parallel) apart.

// lowestPort is the bottom of the range picked from: above the well-known
// and registered ports services of the deployment listen on.
const lowestPort = 16384

// FreePort returns a loopback TCP port nothing listens on, for a process
// the test starts to bind.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePortRange(t, 1)
}

// FreeAddr is FreePort as "127.0.0.1:PORT".
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// FreePortRange returns the first of n consecutive loopback TCP ports
// nothing listens on, for processes the test starts to bind.
func FreePortRange(t testing.TB, n int) int {
	t.Helper()
	lo, hi := pickWindow(ephemeralRange())
	port, err := freePortRange(n, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// pickWindow is where ports are picked from, given the ephemeral range
// [first, last]: below it, or above it when too little is left below.
func pickWindow(first, last int) (lo, hi int) {
	if first-lowestPort >= 1024 {
		return lowestPort, first
	}
	return last + 1, 65536
}

// freePortRange picks n consecutive free ports in [lo, hi).
func freePortRange(n, lo, hi int) (int, error) {
	span := hi - lo - n + 1
	if n < 1 || span < 1 {
		return 0, fmt.Errorf("no range of %d ports in [%d, %d)", n, lo, hi)
	}
	for try := 0; try < 100; try++ {
		base := lo + rand.IntN(span)
		if rangeFree(base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d free consecutive ports in [%d, %d) after 100 tries", n, lo, hi)
}

func rangeFree(base, n int) bool {
	for p := base; p < base+n; p++ {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		ln.Close()
	}
	return true
}

// ephemeralRange is the kernel's ephemeral port range, or Linux's default
// when it cannot be read.
func ephemeralRange() (first, last int) {
	const defaultFirst, defaultLast = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultFirst, defaultLast
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return defaultFirst, defaultLast
	}
	first, err1 := strconv.Atoi(fields[0])
	last, err2 := strconv.Atoi(fields[1])
	if err1 != nil || err2 != nil || first > last {
		return defaultFirst, defaultLast
	}
	return first, last
}
