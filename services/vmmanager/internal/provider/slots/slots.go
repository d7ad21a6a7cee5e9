// Package slots hands out a fixed number of numbered places (configured
// guest endpoints, vmx files, VirtualBox VMs) to VM ids, for the providers
// whose VMs are configured rather than created.
package slots

import "sync"

// Set is safe for concurrent use.
type Set struct {
	n    int
	mu   sync.Mutex
	used map[int]string // slot → vm id
}

// New returns a Set of slots 0..n-1, all free.
func New(n int) *Set { return &Set{n: n, used: map[int]string{}} }

// Claim gives id the lowest free slot; ok is false when every slot is taken.
func (s *Set) Claim(id string) (slot int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < s.n; i++ {
		if _, taken := s.used[i]; !taken {
			s.used[i] = id
			return i, true
		}
	}
	return 0, false
}

// Take gives id the given slot, as when a restarted vmmanager adopts a VM it
// ran before; it is false when the slot is out of range or another id holds
// it.
func (s *Set) Take(slot int, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot < 0 || slot >= s.n {
		return false
	}
	if _, taken := s.used[slot]; taken {
		return false
	}
	s.used[slot] = id
	return true
}

// Release frees whatever slot id holds.
func (s *Set) Release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.used {
		if v == id {
			delete(s.used, k)
		}
	}
}
