package proctest

import (
	"net"
	"strconv"
	"testing"
)

func TestPickWindow(t *testing.T) {
	tests := []struct {
		name          string
		first, last   int
		wantLo, wantH int
	}{
		{"linux default: below the range", 32768, 60999, lowestPort, 32768},
		{"range starts low: above it", 1024, 40000, 40001, 65536},
		{"too little room below: above it", lowestPort + 1000, 50000, 50001, 65536},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := pickWindow(tt.first, tt.last)
			if lo != tt.wantLo || hi != tt.wantH {
				t.Errorf("pickWindow(%d, %d) = [%d, %d), want [%d, %d)", tt.first, tt.last, lo, hi, tt.wantLo, tt.wantH)
			}
		})
	}
}

func TestFreePortRangeIsOutsideTheEphemeralRangeAndFree(t *testing.T) {
	first, last := ephemeralRange()
	for range 20 {
		base := FreePortRange(t, 4)
		if base+3 >= first && base <= last {
			t.Fatalf("FreePortRange(4) = %d-%d, inside the ephemeral range %d-%d", base, base+3, first, last)
		}
		for p := base; p < base+4; p++ {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d of the range: %v", p, err)
			}
			ln.Close()
		}
	}
}

func TestFreePortRangeSkipsATakenPort(t *testing.T) {
	// A window of two ports with the second taken: only the first can be
	// picked.
	lo := FreePortRange(t, 2)
	p := lo + 1
	taken, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for range 10 {
		got, err := freePortRange(1, lo, p+1)
		if err != nil {
			t.Fatal(err)
		}
		if got != lo {
			t.Fatalf("freePortRange(1, %d, %d) = %d with %d taken, want %d", lo, p+1, got, p, lo)
		}
	}
	if _, err := freePortRange(1, p, p+1); err == nil {
		t.Fatalf("freePortRange over the taken port %d alone succeeded", p)
	}
	if _, err := freePortRange(3, lo, p+1); err == nil {
		t.Fatal("freePortRange of 3 ports in a window of 2 succeeded")
	}
}
