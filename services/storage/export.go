package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// ExportReceiver yields the messages of an ExportRollout stream; the
// generated client stream implements it.
type ExportReceiver interface {
	Recv() (*pb.ExportRolloutResponse, error)
}

// ExportSummary reports what WriteExport wrote.
type ExportSummary struct {
	Files int
	Bytes int64
}

// WriteExport writes an ExportRollout stream as files under dir, creating
// it. Every path must be relative and clean, and files are opened through
// an os.Root, so neither a ".." component, an absolute path nor a symlink
// inside dir can write outside it.
func WriteExport(ctx context.Context, stream ExportReceiver, dir string) (ExportSummary, error) {
	var sum ExportSummary
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return sum, fmt.Errorf("create export directory: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return sum, fmt.Errorf("open export directory: %w", err)
	}
	defer root.Close()
	var cur *os.File
	var curPath string
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum, fmt.Errorf("receive export: %w", err)
		}
		if cur != nil && msg.GetPath() != curPath {
			return sum, fmt.Errorf("export file %q ended without eof before %q", curPath, msg.GetPath())
		}
		if cur == nil {
			if err := checkExportPath(msg.GetPath()); err != nil {
				return sum, err
			}
			if d := path.Dir(msg.GetPath()); d != "." {
				if err := root.MkdirAll(d, 0o750); err != nil {
					return sum, fmt.Errorf("create export directory %q: %w", d, err)
				}
			}
			cur, err = root.OpenFile(msg.GetPath(), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
			if err != nil {
				return sum, fmt.Errorf("create export file: %w", err)
			}
			curPath = msg.GetPath()
		}
		n, err := cur.Write(msg.GetData())
		sum.Bytes += int64(n)
		if err != nil {
			return sum, fmt.Errorf("write export file %q: %w", curPath, err)
		}
		if msg.GetEof() {
			err := cur.Close()
			cur = nil
			if err != nil {
				return sum, fmt.Errorf("close export file %q: %w", curPath, err)
			}
			sum.Files++
		}
	}
	if cur != nil {
		return sum, fmt.Errorf("export ended inside file %q", curPath)
	}
	return sum, nil
}

// checkExportPath accepts relative, clean, slash-separated paths.
func checkExportPath(p string) error {
	bad := func(why string) error { return fmt.Errorf("export path %q: %s", p, why) }
	switch {
	case p == "":
		return bad("empty")
	case len(p) > 4096:
		return bad("too long")
	case strings.ContainsAny(p, "\\\x00"):
		return bad("contains a backslash or NUL")
	case path.IsAbs(p):
		return bad("absolute")
	case path.Clean(p) != p:
		return bad("not clean")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." || part == "" {
			return bad("has a . or .. component")
		}
	}
	return nil
}
