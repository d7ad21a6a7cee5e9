package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
	"github.com/digitalocean/go-qemu/qmp/raw"
)

var _ qmp.Monitor = (*qmpSession)(nil)

// qmpMaxExchange bounds a QMP exchange whose ctx has no deadline: savevm
// of a large guest under software emulation takes a minute or two.
const qmpMaxExchange = 10 * time.Minute

// qmpMaxLine bounds one message from QEMU ("info snapshots" of many
// snapshots is the longest we read).
const qmpMaxLine = 4 << 20

// qmpSession is one QMP connection whose every read and write ends with
// its ctx. It implements go-qemu's qmp.Monitor, so go-qemu's typed commands
// (package raw) run over it. go-qemu's own SocketMonitor has no deadlines:
// its Connect and Run wait for QEMU without end (digitalocean/go-qemu#214),
// and its reader goroutine outlives a caller that gives up on a hung QEMU.
// Here nothing runs in the background: the connection's deadline is ctx's,
// and a cancelled ctx closes it, which fails the read or write under way.
type qmpSession struct {
	ctx  context.Context
	c    net.Conn
	sc   *bufio.Scanner
	stop func() bool
}

// dialQMP connects to the QMP socket sock, reads QEMU's greeting and
// negotiates capabilities. ctx must have a deadline: it is the session's.
func dialQMP(ctx context.Context, sock string) (*qmpSession, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil, errors.New("qmp session without a deadline")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("qmp dial: %w", err)
	}
	c.SetDeadline(dl)
	s := &qmpSession{ctx: ctx, c: c, sc: bufio.NewScanner(c)}
	s.sc.Buffer(make([]byte, 0, 4096), qmpMaxLine)
	s.stop = context.AfterFunc(ctx, func() { c.Close() })
	if err := s.Connect(); err != nil {
		s.Disconnect()
		return nil, fmt.Errorf("qmp handshake: %w", err)
	}
	return s, nil
}

// Connect reads the greeting and negotiates capabilities (none).
func (s *qmpSession) Connect() error {
	line, err := s.read()
	if err != nil {
		return err
	}
	var greeting struct {
		QMP *json.RawMessage `json:"QMP"`
	}
	if err := json.Unmarshal(line, &greeting); err != nil || greeting.QMP == nil {
		return fmt.Errorf("not a QMP greeting: %.200q", line)
	}
	_, err = s.Run([]byte(`{"execute":"qmp_capabilities"}`))
	return err
}

// Disconnect closes the connection.
func (s *qmpSession) Disconnect() error {
	s.stop()
	return s.c.Close()
}

// Run sends one command and returns QEMU's answer to it, skipping the
// asynchronous events QEMU sends in between.
func (s *qmpSession) Run(cmd []byte) ([]byte, error) {
	msg := make([]byte, 0, len(cmd)+1)
	msg = append(append(msg, cmd...), '\n')
	if _, err := s.c.Write(msg); err != nil {
		return nil, s.fail(err)
	}
	for {
		line, err := s.read()
		if err != nil {
			return nil, err
		}
		var r struct {
			Event  string          `json:"event"`
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("bad QMP message %.200q: %v", line, err)
		}
		switch {
		case r.Event != "":
			continue
		case r.Error != nil:
			return nil, fmt.Errorf("%s: %s", r.Error.Class, r.Error.Desc)
		case r.Return == nil:
			return nil, fmt.Errorf("QMP message without return or error: %.200q", line)
		}
		return line, nil
	}
}

// Events is not offered: every session is one command long.
func (s *qmpSession) Events(context.Context) (<-chan qmp.Event, error) {
	return nil, qmp.ErrEventsNotSupported
}

func (s *qmpSession) read() ([]byte, error) {
	if s.sc.Scan() {
		return s.sc.Bytes(), nil
	}
	err := s.sc.Err()
	if err == nil {
		err = errors.New("QEMU closed the QMP connection")
	}
	return nil, s.fail(err)
}

// fail reports ctx's end rather than the closed connection or the passed
// deadline it caused.
func (s *qmpSession) fail(err error) error {
	if cerr := s.ctx.Err(); cerr != nil {
		return cerr
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return context.DeadlineExceeded
	}
	return err
}

// qmpDo runs fn over a new QMP session of the VM's socket: QMP takes one
// client at a time, and a session per exchange needs nothing to be
// re-established after a vmmanager restart. what names the exchange in
// errors.
func qmpDo(ctx context.Context, sock, what string, fn func(*raw.Monitor) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, qmpMaxExchange)
		defer cancel()
	}
	s, err := dialQMP(ctx, sock)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer s.Disconnect()
	if err := fn(raw.NewMonitor(s)); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
