package store

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
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

// TestAddsLabelsToOldDatabase: a database made before leases had labels
// gains the column on open, and its leases read back with none.
func TestAddsLabelsToOldDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "vmmanager.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE leases (
  id TEXT PRIMARY KEY, pool TEXT NOT NULL, vm_id TEXT NOT NULL, token_hash BLOB NOT NULL,
  holder TEXT NOT NULL, ttl_ns INTEGER NOT NULL, acquire_time INTEGER NOT NULL,
  expire_time INTEGER NOT NULL, renewals INTEGER NOT NULL);
INSERT INTO leases VALUES('lease-1','p','p-1',x'01','ep',60000000000,1,2,0);`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, dir)
	if err != nil {
		t.Fatalf("open a database without lease labels: %v", err)
	}
	defer s.Close()
	leases, err := s.Leases(ctx, "p")
	if err != nil || len(leases) != 1 || len(leases[0].Labels) != 0 {
		t.Fatalf("Leases = %+v, %v; want the old lease without labels", leases, err)
	}
	l := leases[0]
	l.Labels = map[string]string{"task": "t-1"}
	if err := s.SaveLease(l, VM{ID: "p-1", Pool: "p", Provider: "process", State: "leased"}); err != nil {
		t.Fatal(err)
	}
	if leases, _ = s.Leases(ctx, "p"); len(leases) != 1 || leases[0].Labels["task"] != "t-1" {
		t.Errorf("labels after save = %+v, want task=t-1", leases)
	}
}

func TestHandOff(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	lease := func(id, vm string) Lease {
		return Lease{ID: id, Pool: "p", VMID: vm, TokenHash: []byte{1}, Holder: "h", TTL: time.Minute, AcquireTime: now, ExpireTime: now.Add(time.Minute)}
	}
	vm := func(id, state string) VM {
		return VM{ID: id, Pool: "p", Provider: "process", State: state, CreateTime: now, StateTime: now}
	}
	tests := []struct {
		name       string
		ended      VM
		granted    VM
		wantStates map[string]string
	}{
		{"the released VM granted again", vm("a", "ready"), vm("a", "leased"), map[string]string{"a": "leased", "b": "ready"}},
		{"another VM granted", vm("a", "resetting"), vm("b", "leased"), map[string]string{"a": "resetting", "b": "leased"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := Open(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.SaveLease(lease("lease-1", "a"), vm("a", "leased")); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveVM(vm("b", "ready")); err != nil {
				t.Fatal(err)
			}
			if err := s.HandOff("lease-1", tt.ended, lease("lease-2", tt.granted.ID), tt.granted); err != nil {
				t.Fatal(err)
			}
			leases, err := s.Leases(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			if len(leases) != 1 || leases[0].ID != "lease-2" || leases[0].VMID != tt.granted.ID {
				t.Errorf("leases = %+v, want lease-2 on %s only", leases, tt.granted.ID)
			}
			vms, err := s.VMs(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, v := range vms {
				got[v.ID] = v.State
			}
			for id, want := range tt.wantStates {
				if got[id] != want {
					t.Errorf("vm %s state = %q, want %q", id, got[id], want)
				}
			}
		})
	}
}
