package store

import (
	"bytes"
	"context"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 123)
	v := VM{ID: "p-1", Pool: "p", Provider: "process", State: "leased", Ref: "42", Endpoint: "http://127.0.0.1:5100",
		Ports: map[string]string{"vnc": "127.0.0.1:8006"}, Data: map[string]string{"display": "100"},
		CreateTime: now, StateTime: now, LeasesServed: 3, Resets: 2}
	l := Lease{ID: "lease-1", Pool: "p", VMID: "p-1", TokenHash: []byte{1, 2, 3}, Holder: "ep", TTL: time.Minute,
		AcquireTime: now, ExpireTime: now.Add(time.Minute), Renewals: 1}
	if err := s.SaveLease(l, v); err != nil {
		t.Fatal(err)
	}
	id := s.InstanceID()
	s.Close()

	s, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.InstanceID() != id {
		t.Errorf("instance id = %s after reopen, want %s", s.InstanceID(), id)
	}
	vms, err := s.VMs(ctx, "p")
	if err != nil || len(vms) != 1 {
		t.Fatalf("VMs = %v, %v; want one", vms, err)
	}
	got := vms[0]
	if got.ID != v.ID || got.Ref != v.Ref || got.Ports["vnc"] != "127.0.0.1:8006" || got.Data["display"] != "100" ||
		!got.CreateTime.Equal(now) || got.LeasesServed != 3 || got.Resets != 2 || got.State != "leased" {
		t.Errorf("vm = %+v, want %+v", got, v)
	}
	leases, err := s.Leases(ctx, "p")
	if err != nil || len(leases) != 1 {
		t.Fatalf("Leases = %v, %v; want one", leases, err)
	}
	gl := leases[0]
	if gl.ID != l.ID || !bytes.Equal(gl.TokenHash, l.TokenHash) || gl.TTL != time.Minute || !gl.ExpireTime.Equal(l.ExpireTime) || gl.Renewals != 1 {
		t.Errorf("lease = %+v, want %+v", gl, l)
	}
	v.State = "resetting"
	if err := s.EndLease(l.ID, v); err != nil {
		t.Fatal(err)
	}
	if leases, _ := s.Leases(ctx, "p"); len(leases) != 0 {
		t.Errorf("leases after EndLease = %v, want none", leases)
	}
	if err := s.DeleteVM(v.ID); err != nil {
		t.Fatal(err)
	}
	if vms, _ := s.VMs(ctx, "p"); len(vms) != 0 {
		t.Errorf("vms after DeleteVM = %v, want none", vms)
	}
}
