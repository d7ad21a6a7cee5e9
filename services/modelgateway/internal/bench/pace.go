package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// pacer wakes the open-loop generator at a fixed period from a timerfd
// that Go's network poller watches. time.Sleep and time.Ticker cannot keep
// a sub-millisecond schedule on Linux: a Go process with nothing to run
// waits for its next timer in epoll_wait, whose timeout is whole
// milliseconds, so a 200 µs schedule went out in bursts of five or six
// requests each millisecond (82 % of sends came less than 20 µs after the
// one before), and the targets were measured under bursts, not the rate.
// A timerfd expiry is a file event, which ends epoll_wait when it happens.
type pacer struct {
	f      *os.File
	start  time.Time
	period time.Duration
	buf    [8]byte
}

// newPacer arms a timer that expires every period, the first time one
// period from now.
func newPacer(period time.Duration) (*pacer, error) {
	if period <= 0 {
		return nil, fmt.Errorf("pacer period %v: must be positive", period)
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	// Non-blocking, so os.NewFile hands it to the network poller.
	f := os.NewFile(uintptr(fd), "timerfd")
	ts := unix.NsecToTimespec(int64(period))
	p := &pacer{f: f, start: time.Now(), period: period}
	if err := unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Interval: ts, Value: ts}, nil); err != nil {
		f.Close()
		return nil, fmt.Errorf("timerfd_settime: %w", err)
	}
	return p, nil
}

// wait blocks until the next expiry and returns how many periods ended
// since the last call: more than one when the generator fell behind.
func (p *pacer) wait() (int, error) {
	n, err := p.f.Read(p.buf[:])
	if err != nil {
		return 0, fmt.Errorf("read timerfd: %w", err)
	}
	if n != len(p.buf) {
		return 0, errors.New("read timerfd: short read")
	}
	return int(binary.NativeEndian.Uint64(p.buf[:])), nil
}

// due is when the i-th send (from 0) was scheduled.
func (p *pacer) due(i int) time.Time { return p.start.Add(time.Duration(i+1) * p.period) }

func (p *pacer) close() error { return p.f.Close() }
