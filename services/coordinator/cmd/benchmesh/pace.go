package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// The same binaries on the same kind of machine have run the mesh at
// costs per step 1.2-1.5× apart, within an hour and across machines, every
// process alike (the guest simulator too, which only writes the same bytes
// to sockets). A pace probe measures, on an otherwise idle benchmark
// process right before and after each run, what the mesh spends its cores
// on besides its own code: the kernel moving a screenshot between two
// sockets, a first touch of a fresh page, and SHA-256. Its figures let two
// runs' costs be compared knowing whether the machine changed under them.

// probeScreenshot is the size the probe moves and hashes: a simguest
// screenshot.
const probeScreenshot = 209 << 10

// pace is what the probe measured, in CPU time of this process.
type pace struct {
	socket time.Duration // one screenshot written to and read from loopback TCP
	page   time.Duration // one fresh 4 KiB page touched
	sha256 float64       // MB hashed per CPU second
}

func (p pace) String() string {
	return fmt.Sprintf("%d KiB over loopback TCP %d µs CPU, a fresh page %.1f µs, SHA-256 %.0f MB/s",
		probeScreenshot>>10, p.socket.Microseconds(), float64(p.page.Nanoseconds())/1000, p.sha256)
}

// probePace runs the probe; it takes under a second.
func probePace() (pace, error) {
	var p pace
	var err error
	if p.socket, err = probeSocket(300); err != nil {
		return p, fmt.Errorf("pace probe, loopback: %w", err)
	}
	if p.page, err = probePages(4, 32<<20); err != nil {
		return p, fmt.Errorf("pace probe, pages: %w", err)
	}
	p.sha256 = probeSHA256(200)
	return p, nil
}

// cpuTime is this process's user and system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(rusageSeconds(ru) * float64(time.Second))
}

// probeSocket sends a screenshot's bytes over loopback TCP rounds times,
// each answered with one byte, and returns the CPU time per round (both
// ends: they are this process).
func probeSocket(rounds int) (time.Duration, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	served := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		buf := make([]byte, probeScreenshot)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				served <- nil // the client closed
				return
			}
			if _, err := c.Write(buf[:1]); err != nil {
				served <- err
				return
			}
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, err
	}
	payload := make([]byte, probeScreenshot)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	ack := make([]byte, 1)
	round := func() error {
		if _, err := c.Write(payload); err != nil {
			return err
		}
		_, err := io.ReadFull(c, ack)
		return err
	}
	const warmup = 20
	for range warmup {
		if err := round(); err != nil {
			c.Close()
			return 0, err
		}
	}
	before := cpuTime()
	for range rounds {
		if err := round(); err != nil {
			c.Close()
			return 0, err
		}
	}
	spent := cpuTime() - before
	c.Close()
	if err := <-served; err != nil {
		return 0, err
	}
	return spent / time.Duration(rounds), nil
}

// probePages maps size bytes of fresh anonymous memory passes times,
// writes one byte in each page and unmaps it, and returns the CPU time per
// page (the fault, the kernel zeroing the page, and the unmap).
func probePages(passes, size int) (time.Duration, error) {
	pageSize := syscall.Getpagesize()
	before := cpuTime()
	for range passes {
		m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			return 0, err
		}
		// Go's heap and the kernel's socket buffers take small pages.
		_ = syscall.Madvise(m, syscall.MADV_NOHUGEPAGE)
		for i := 0; i < size; i += pageSize {
			m[i] = 1
		}
		if err := syscall.Munmap(m); err != nil {
			return 0, err
		}
	}
	return (cpuTime() - before) / time.Duration(passes*size/pageSize), nil
}

// probeSHA256 hashes a screenshot's bytes rounds times and returns MB
// hashed per CPU second.
func probeSHA256(rounds int) float64 {
	data := make([]byte, probeScreenshot)
	for i := range data {
		data[i] = byte(i * 13)
	}
	before := cpuTime()
	for range rounds {
		sha256.Sum256(data)
	}
	spent := cpuTime() - before
	if spent <= 0 {
		return 0
	}
	return float64(rounds*probeScreenshot) / 1e6 / spent.Seconds()
}
