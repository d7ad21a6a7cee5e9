package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// Subprocess bounds: a metric never waits on a tool longer than
// toolTimeout nor keeps more than maxToolOutput bytes of its output.
const (
	toolTimeout   = 60 * time.Second
	maxToolOutput = 64 << 20
)

// errTooMuchOutput is returned when a tool prints more than the cap.
var errTooMuchOutput = errors.New("tool output exceeds the cap")

// cappedBuffer keeps up to max bytes and fails the write past it, which
// ends the tool with a broken pipe instead of filling memory; over records
// that it did, since the tool's exit status then hides the write's error.
// With discard set it keeps the first max bytes and drops the rest
// instead, for stderr, whose excess must not stop the tool. The buffer is
// a field, not embedded: an embedded bytes.Buffer's ReadFrom would let
// os/exec's io.Copy fill it past the cap without calling Write.
type cappedBuffer struct {
	buf     bytes.Buffer
	max     int
	discard bool
	over    bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.max {
		b.over = true
		if b.discard {
			b.buf.Write(p[:b.max-b.buf.Len()])
			return len(p), nil
		}
		return 0, errTooMuchOutput
	}
	return b.buf.Write(p)
}

// Bytes returns what was kept.
func (b *cappedBuffer) Bytes() []byte { return b.buf.Bytes() }

// requireTools fails when a program a metric runs is not installed: the
// metric cannot judge then, and scoring would be wrong (two unreadable
// videos, for one, count as equal).
func requireTools(metricName string, names ...string) error {
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			return fmt.Errorf("%s needs %s, which is not installed", metricName, n)
		}
	}
	return nil
}

// runTool runs name with args under toolTimeout and returns its stdout.
// Output past maxToolOutput is an error wrapping metric.ErrOverCap: the
// input it came from is not scored.
func runTool(ctx context.Context, name string, args ...string) ([]byte, error) {
	return runToolInput(ctx, nil, maxToolOutput, name, args...)
}

// runToolInput is runTool with stdin and maxOut as the cap on its output.
func runToolInput(ctx context.Context, stdin []byte, maxOut int, name string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s is not installed: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	out := &cappedBuffer{max: maxOut}
	errOut := &cappedBuffer{max: 64 << 10, discard: true}
	cmd.Stdout, cmd.Stderr = out, errOut
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if out.over {
			return nil, fmt.Errorf("%s: output over %d bytes: %w", name, maxOut, metric.ErrOverCap)
		}
		return nil, fmt.Errorf("%s: %w: %s", name, err, bytes.TrimSpace(errOut.Bytes()))
	}
	return out.Bytes(), nil
}

// startTool starts name with args under toolTimeout and returns its
// stdout as a stream; wait reaps the process.
func startTool(ctx context.Context, name string, args ...string) (io.Reader, func() error, error) {
	return startToolInput(ctx, nil, name, args...)
}

// startToolInput is startTool with stdin (when not nil) copied to the
// tool's standard input; wait also waits for that copy to end.
func startToolInput(ctx context.Context, stdin io.Reader, name string, args ...string) (io.Reader, func() error, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not installed: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stderr = &cappedBuffer{max: 64 << 10, discard: true}
	cmd.WaitDelay = time.Second
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	wait := func() error {
		// Killing first lets a reader stop early without waiting for the
		// tool to finish a long file.
		cancel()
		return cmd.Wait()
	}
	return out, wait, nil
}
