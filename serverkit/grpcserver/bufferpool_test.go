package grpcserver

import "testing"

func TestPow2PoolSizes(t *testing.T) {
	p := newPow2Pool(8, 12)
	tests := []struct {
		length, wantCap int
	}{
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {4096, 4096}, {4097, 4097},
	}
	for _, tt := range tests {
		b := p.Get(tt.length)
		if len(*b) != tt.length || cap(*b) != tt.wantCap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", tt.length, len(*b), cap(*b), tt.length, tt.wantCap)
		}
		p.Put(b)
	}
}

func TestPow2PoolReuseFitsLength(t *testing.T) {
	p := newPow2Pool(8, 20)
	for _, n := range []int{300, 1000, 70000, 200 << 10, 1 << 20} {
		b := p.Get(n)
		p.Put(b)
		for _, m := range []int{n, n/2 + 1} {
			got := p.Get(m)
			if len(*got) != m || cap(*got) < m {
				t.Fatalf("Get(%d) after Put of cap %d: len %d cap %d", m, cap(*b), len(*got), cap(*got))
			}
			p.Put(got)
		}
	}
}
