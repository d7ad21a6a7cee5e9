// Package loopboot holds what the gateway's gnet servers (the HTTP front's
// and the gRPC front's event loops) need when they boot: the address their
// listener took, and gnet's logger.
package loopboot

import (
	"fmt"
	"net"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Addr is the address eng's listener is bound to (eng has one).
func Addr(eng gnet.Engine) (net.Addr, error) {
	fd, err := eng.Dup()
	if err != nil {
		return nil, fmt.Errorf("listener: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	unix.Close(fd)
	if err != nil {
		return nil, fmt.Errorf("listener: %w", err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}, nil
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}, nil
	}
	return nil, fmt.Errorf("listener address of type %T", sa)
}

// Logger is log for gnet's own messages, from warnings up: gnet logs each
// connection at info level.
func Logger(log *zap.Logger) *zap.SugaredLogger {
	if log.Core().Enabled(zap.InfoLevel) {
		log = log.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	}
	return log.Sugar()
}
