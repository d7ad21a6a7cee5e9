package blobstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// BenchmarkFilesPut measures durable puts of distinct 200 KB blobs from
// many goroutines, as concurrent AppendSteps streams issue them.
func BenchmarkFilesPut(b *testing.B) {
	f, err := NewFiles(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 200<<10)
	rand.Read(data)
	b.SetBytes(int64(len(data)))
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, len(data))
		copy(buf, data)
		for pb.Next() {
			rand.Read(buf[:16])
			sum := sha256.Sum256(buf)
			if _, err := f.Put(context.Background(), hex.EncodeToString(sum[:]), buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
