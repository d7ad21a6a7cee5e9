package storage_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// sliceStream replays export messages, as a server might send them.
type sliceStream struct{ msgs []*pb.ExportRolloutResponse }

func (s *sliceStream) Recv() (*pb.ExportRolloutResponse, error) {
	if len(s.msgs) == 0 {
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

func TestWriteExportRefusesEscapes(t *testing.T) {
	for _, tc := range []struct {
		name, path string
	}{
		{"parent", "../escape.txt"},
		{"nested parent", "os/../../escape.txt"},
		{"absolute", "/tmp/escape.txt"},
		{"dot", "./x"},
		{"empty component", "os//x"},
		{"backslash", `..\escape.txt`},
		{"through symlink", "link/escape.txt"},
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dir, outside := filepath.Join(base, "export"), filepath.Join(base, "outside")
			for _, d := range []string{dir, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			stream := &sliceStream{msgs: []*pb.ExportRolloutResponse{{Path: tc.path, Data: []byte("x"), Eof: true}}}
			if _, err := storage.WriteExport(context.Background(), stream, dir); err == nil {
				t.Fatalf("WriteExport(%q) succeeded, want an error", tc.path)
			}
			var found []string
			filepath.Walk(base, func(p string, info os.FileInfo, err error) error {
				if err == nil && !info.IsDir() && info.Mode()&os.ModeSymlink == 0 {
					found = append(found, p)
				}
				return nil
			})
			if len(found) != 0 {
				t.Errorf("files written: %v, want none", found)
			}
		})
	}
}

func TestWriteExportChecksFraming(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []*pb.ExportRolloutResponse
		want string
	}{
		{"file without eof", []*pb.ExportRolloutResponse{{Path: "a", Data: []byte("x")}}, "ended inside"},
		{"interleaved files", []*pb.ExportRolloutResponse{{Path: "a", Data: []byte("x")}, {Path: "b", Eof: true}}, "without eof"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := storage.WriteExport(context.Background(), &sliceStream{msgs: tc.msgs}, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteExportWritesChunks(t *testing.T) {
	dir := t.TempDir()
	stream := &sliceStream{msgs: []*pb.ExportRolloutResponse{
		{Path: "os/t1/traj.jsonl", Data: []byte("ab")}, {Path: "os/t1/traj.jsonl", Data: []byte("c"), Eof: true},
		{Path: "result.txt", Eof: true},
	}}
	sum, err := storage.WriteExport(context.Background(), stream, dir)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != 2 || sum.Bytes != 3 {
		t.Errorf("summary = %+v, want 2 files, 3 bytes", sum)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "os", "t1", "traj.jsonl")); string(got) != "abc" {
		t.Errorf("traj.jsonl = %q, want %q", got, "abc")
	}
}
