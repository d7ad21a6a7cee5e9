package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// diskResult is one measurement of the disk's durable write rate.
type diskResult struct {
	bytes   int64
	elapsed time.Duration
}

func (d diskResult) mbps() float64 { return float64(d.bytes) / 1e6 / d.elapsed.Seconds() }

// diskRate writes volume bytes into dir the way `dd oflag=direct` does
// (O_DIRECT, 1 MiB aligned writes, fdatasync at the end), split between
// writers files written at once, and returns the time until every byte is
// durable. The storage service writes its packs with O_DIRECT and flushes
// them with fdatasync, so this is the rate its blob writes cannot exceed.
func diskRate(dir string, volume int64, writers int) (diskResult, error) {
	const chunk = 1 << 20
	per := (volume/int64(writers) + chunk - 1) / chunk * chunk
	buf, err := alignedBuffer(chunk)
	if err != nil {
		return diskResult{}, err
	}
	for i := range buf {
		buf[i] = byte(i*7 + i>>11) // not zeros: no file system shortcut
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return diskResult{}, err
	}
	var wg sync.WaitGroup
	errs := make([]error, writers)
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = writeDirect(filepath.Join(dir, fmt.Sprintf("disk-%d", w)), buf, per)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for w := 0; w < writers; w++ {
		os.Remove(filepath.Join(dir, fmt.Sprintf("disk-%d", w)))
		if errs[w] != nil {
			return diskResult{}, errs[w]
		}
	}
	return diskResult{bytes: per * int64(writers), elapsed: elapsed}, nil
}

func writeDirect(path string, buf []byte, n int64) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_DIRECT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("open %s with O_DIRECT: %w", path, err)
	}
	defer unix.Close(fd)
	for off := int64(0); off < n; off += int64(len(buf)) {
		if _, err := unix.Pwrite(fd, buf, off); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := unix.Fdatasync(fd); err != nil {
		return fmt.Errorf("fdatasync %s: %w", path, err)
	}
	return nil
}

// alignedBuffer returns n bytes aligned to 4 KiB, as O_DIRECT needs.
func alignedBuffer(n int) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	if uintptr(unsafe.Pointer(&b[0]))%4096 != 0 {
		return nil, fmt.Errorf("mmap returned an unaligned buffer")
	}
	return b, nil
}
