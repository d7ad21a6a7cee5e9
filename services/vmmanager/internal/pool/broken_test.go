package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
)

// TestBrokenPoolRefusesLeases: when every boot fails (an image that does
// not exist), acquirers are told so with the provider's error instead of
// waiting for a VM that cannot come.
func TestBrokenPoolRefusesLeases(t *testing.T) {
	f := &fixture{prov: newMem(), clk: clock.NewFake(time.Unix(1_700_000_000, 0)), dir: t.TempDir(), t: t}
	f.prov.failCreate = errors.New("No such image: rolloutmesh/nope")
	f.spec = Spec{Name: "p", Provider: "mem", Size: BrokenAfter, ResetTimeout: 5 * time.Second,
		BootTimeout: 5 * time.Second, HealthInterval: time.Minute}
	f.open()
	f.p.Start()
	t.Cleanup(func() {
		f.p.Close(context.Background(), false)
		f.st.Close()
	})
	var err error
	waitFor(t, "the pool to give up on its boots", func() bool {
		_, err = f.p.Acquire(context.Background(), AcquireRequest{Holder: "h", TTL: time.Minute})
		return errors.Is(err, ErrPoolBroken)
	})
	if !strings.Contains(err.Error(), "No such image: rolloutmesh/nope") {
		t.Errorf("error %q does not carry the boot error", err)
	}
}
