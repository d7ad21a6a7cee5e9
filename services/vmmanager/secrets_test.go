package vmmanager

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// TestGuestTokenNotOnCommandLines boots real desktopd guests (each with
// its Xvfb, window manager and session bus) with a guest token, runs a
// command in one, and reads the command line of every process below the
// test: the token must be in none, since any local user can read them. The
// guests' own children must not even inherit it in their environment.
func TestGuestTokenNotOnCommandLines(t *testing.T) {
	need(t, "Xvfb", haveBinary("Xvfb"))
	need(t, "openbox", haveBinary("openbox"))
	desktopd, _ := binaries(t)
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := "guest-" + hex.EncodeToString(b)

	env := daemontest.Env(t)
	spec := processPool(t, "secret", 2, desktopd, false)
	spec.Process.GuestToken = token
	spec.Process.BasePort, spec.Process.BaseDisplay = 15300, 170
	svc, err := New(ctxT(t, time.Minute), Config{Pools: []PoolSpec{spec}}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, daemontest.Serve(t, env, svc))
	ctx := ctxT(t, 2*time.Minute)
	var leases []*rolloutmeshv1.Lease
	for range 2 {
		l, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "secret", WaitTimeout: durationpb.New(60 * time.Second)})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		leases = append(leases, l)
	}
	// The guests enforce the token they were given.
	for _, l := range leases {
		if l.GuestToken != token {
			t.Errorf("lease guest token %q, want the pool's", l.GuestToken)
		}
		for _, tt := range []struct {
			auth string
			want int
		}{{"", http.StatusUnauthorized}, {"Bearer " + token, http.StatusOK}} {
			req, _ := http.NewRequest(http.MethodGet, l.Endpoint+"/platform", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s/platform with auth %t: %d, want %d", l.Endpoint, tt.auth != "", resp.StatusCode, tt.want)
			}
		}
	}
	// A command running in a guest, so that its process is there to look at.
	req, _ := http.NewRequest(http.MethodPost, leases[0].Endpoint+"/setup/launch",
		strings.NewReader(`{"command": ["sleep", "30"]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	var procs []proctest.Process
	waitUntil(t, 10*time.Second, "the launched sleep", func() bool {
		procs, _ = proctest.Descendants(os.Getpid())
		for _, p := range procs {
			if len(p.Argv) > 1 && p.Argv[0] == "sleep" && p.Argv[1] == "30" {
				return true
			}
		}
		return false
	})
	procs = proctest.CheckArgv(t, token)
	seen := map[string]int{}
	pid := os.Getpid()
	for _, p := range procs {
		if len(p.Argv) > 0 {
			seen[p.Argv[0][strings.LastIndexByte(p.Argv[0], '/')+1:]]++
		}
		// desktopd's children must not inherit the token; desktopd itself
		// starts with it in its environment, readable by its user only.
		if p.PPID != pid && strings.Contains(strings.Join(p.Environ, "\x00"), token) {
			t.Errorf("pid %d %q inherited the guest token in its environment", p.PID, p.Argv)
		}
	}
	for _, want := range []string{"desktopd", "Xvfb", "sleep"} {
		if seen[want] == 0 {
			t.Errorf("no %s among the test's descendants %v: the check looked at the wrong processes", want, seen)
		}
	}
	t.Logf("checked %d descendant processes: %v", len(procs), seen)
}
