package storage_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
)

// damagedStore is a store whose only pack has one blob with flipped bytes,
// one cut short by truncating the pack, and one intact; each is the
// screenshot of the one step of an episode of its own rollout.
type damagedStore struct {
	cfg                  storage.Config
	pack                 string
	flipped, cut, intact []byte // the content as it was stored
	flippedOnDisk        []byte // what the pack now holds for flipped
	flippedOff, cutOff   int64
	// flippedIdx and cutIdx name the rollouts (rdmg<i>) and episodes
	// (rdmg<i>-e) of the damaged blobs.
	flippedIdx, cutIdx int
	fsckBin            string
	// The fsck binary's output and exit code on the store before damage.
	cleanFsckOut  string
	cleanFsckCode int
}

// newDamagedStore stores an episode of three steps through a real server,
// stops it, runs the fsck binary on the clean store, then damages the pack
// as a failing disk or a careless operator would.
func newDamagedStore(t *testing.T) *damagedStore {
	t.Helper()
	dir := t.TempDir()
	d := &damagedStore{cfg: storage.Config{Index: filepath.Join(dir, "index.db"), Blobs: filepath.Join(dir, "blobs")},
		pack: filepath.Join(dir, "blobs", "packs", "00000000.pack")}
	shots := make([][]byte, 3)
	for i := range shots {
		shots[i] = make([]byte, 20_000+i)
		rand.Read(shots[i])
	}
	t.Run("store", func(t *testing.T) {
		c := startService(t, d.cfg)
		var msgs []*pb.AppendStepsRequest
		for i, shot := range shots {
			ep := episode(damagedRollout(i), damagedRollout(i)+"-e", "g", "task", "os", 0)
			st := step(ep.GetEpisodeId(), 0, shot, 1)
			// The model saw the screenshot too: JSONL exports inline it.
			st.ModelCall.NewMessages = []*pb.ChatMessage{{Role: "user", Content: []*pb.ContentPart{
				{Part: &pb.ContentPart_Image{Image: &pb.Image{Data: shot, MediaType: "image/png"}}}}}}
			msgs = append(msgs, epMsg(ep), stepMsg(st), epMsg(finished(ep, done, 1, "")))
		}
		if _, err := appendAll(testCtx(t), c, msgs...); err != nil {
			t.Fatalf("AppendSteps: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	bin, err := buildStorage()
	if err != nil {
		t.Fatal(err)
	}
	d.fsckBin = bin
	d.cleanFsckOut, d.cleanFsckCode = d.fsck(t)

	raw, err := os.ReadFile(d.pack)
	if err != nil {
		t.Fatal(err)
	}
	offs := make([]int64, len(shots))
	for i, shot := range shots {
		if offs[i] = int64(bytes.Index(raw, shot)); offs[i] < 0 {
			t.Fatalf("screenshot %d is not in %s", i, d.pack)
		}
	}
	order := []int{0, 1, 2}
	slices.SortFunc(order, func(a, b int) int { return int(offs[a] - offs[b]) })
	// Flip bytes in the first blob of the pack, cut the last one short.
	d.flippedIdx, d.cutIdx = order[0], order[2]
	d.flipped, d.cut, d.intact = shots[order[0]], shots[order[2]], shots[order[1]]
	d.flippedOff, d.cutOff = offs[order[0]], offs[order[2]]
	d.flippedOnDisk = bytes.Clone(d.flipped)
	for i := 1000; i < 1016; i++ {
		d.flippedOnDisk[i] ^= 0xff
	}
	f, err := os.OpenFile(d.pack, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(d.flippedOnDisk[1000:1016], d.flippedOff+1000); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(d.cutOff + int64(len(d.cut))/2); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return d
}

func damagedRollout(i int) string { return fmt.Sprintf("rdmg%d", i) }

// fsck runs `storage fsck` on the store and returns its output and exit
// code.
func (d *damagedStore) fsck(t *testing.T, extra ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"fsck", "--index", d.cfg.Index, "--blobs", d.cfg.Blobs}, extra...)
	cmd := exec.CommandContext(ctx, d.fsckBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("run storage fsck: %v", err)
		return "", 0
	}
}

// TestFsckFindsFlippedBytesAndTruncatedPack: the fsck binary passes a
// clean store and exits non-zero naming the damaged blobs and pack of a
// damaged one.
func TestFsckFindsFlippedBytesAndTruncatedPack(t *testing.T) {
	d := newDamagedStore(t)
	if d.cleanFsckCode != 0 || !strings.Contains(d.cleanFsckOut, "OK: no damage found") {
		t.Fatalf("fsck of the clean store exited %d:\n%s", d.cleanFsckCode, d.cleanFsckOut)
	}

	out, code := d.fsck(t)
	t.Logf("storage fsck of the damaged store:\n%s", out)
	if code != 1 {
		t.Errorf("fsck of the damaged store exited %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{sha(d.flipped), "content hashes to", sha(d.cut), "truncated", d.pack, "DAMAGED"} {
		if !strings.Contains(out, want) {
			t.Errorf("fsck report does not mention %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, sha(d.intact)) {
		t.Errorf("fsck report names the intact blob %s:\n%s", sha(d.intact), out)
	}

	out, code = d.fsck(t, "--json")
	if code != 1 {
		t.Errorf("fsck --json exited %d, want 1", code)
	}
	// The JSON report is stdout's first value; the exit reason follows on
	// stderr.
	var rep storage.FsckReport
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&rep); err != nil {
		t.Fatalf("fsck --json output does not decode: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, p := range rep.BlobProblems {
		got[p.Hash] = p.Problem
	}
	if rep.OK || rep.BlobsChecked != 3 || len(got) != 2 || !strings.HasPrefix(got[sha(d.flipped)], "content hashes to") ||
		!strings.HasPrefix(got[sha(d.cut)], "truncated") {
		t.Errorf("fsck --json: ok %v, %d blobs checked, problems %v; want the flipped and the cut blob of 3", rep.OK, rep.BlobsChecked, got)
	}
	if len(rep.PackProblems) != 1 || rep.PackProblems[0].Path != d.pack || !strings.HasPrefix(rep.PackProblems[0].Problem, "truncated") {
		t.Errorf("pack problems = %+v, want %s truncated", rep.PackProblems, d.pack)
	}
}

// TestDamagedBlobsAreDataLoss: every read path refuses a damaged blob with
// DataLoss, sends none of its bytes, logs it with its pack and offset and
// counts it; the start names the damaged pack; intact blobs are served.
func TestDamagedBlobsAreDataLoss(t *testing.T) {
	d := newDamagedStore(t)
	env := daemontest.Env(t)
	core, logs := observer.New(zap.WarnLevel)
	env.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core(), core))
	c := startServiceEnv(t, d.cfg, env)
	ctx := testCtx(t)

	// The start names the damaged pack (in the background).
	deadline := time.Now().Add(10 * time.Second)
	for logs.FilterMessageSnippet("damaged pack file").Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if e := logs.FilterMessageSnippet("damaged pack file").All(); len(e) != 1 || e[0].ContextMap()["pack"] != d.pack {
		t.Errorf("start logged %v, want one damaged pack file entry naming %s", e, d.pack)
	}

	for _, tc := range []struct {
		name string
		data []byte
		off  int64
		idx  int
	}{{"flipped bytes", d.flipped, d.flippedOff, d.flippedIdx}, {"truncated pack", d.cut, d.cutOff, d.cutIdx}} {
		rollout := damagedRollout(tc.idx)
		t.Run(tc.name+"/GetBlob", func(t *testing.T) {
			data, msgs, err := blobBytes(t, ctx, c, sha(tc.data))
			if status.Code(err) != codes.DataLoss {
				t.Errorf("GetBlob = %v, want DataLoss", err)
			}
			if len(msgs) != 0 || len(data) != 0 {
				t.Errorf("GetBlob sent %d messages, %d bytes of a damaged blob; want none", len(msgs), len(data))
			}
			entries := logs.FilterMessage("stored blob is damaged, not serving it").FilterField(zap.String("hash", sha(tc.data))).All()
			if len(entries) == 0 {
				t.Fatalf("no damaged-blob log entry for %s", sha(tc.data))
			}
			if m := entries[0].ContextMap(); m["pack"] != "00000000.pack" || m["offset"] != tc.off {
				t.Errorf("log fields pack %v offset %v, want 00000000.pack %d", m["pack"], m["offset"], tc.off)
			}
		})
		t.Run(tc.name+"/GetEpisode inline", func(t *testing.T) {
			req := &pb.GetEpisodeRequest{EpisodeId: rollout + "-e", IncludeSteps: true, InlineBlobs: true}
			if _, err := c.GetEpisode(ctx, req); status.Code(err) != codes.DataLoss {
				t.Errorf("GetEpisode inline = %v, want DataLoss", err)
			}
			req.InlineBlobs = false
			if _, err := c.GetEpisode(ctx, req); err != nil {
				t.Errorf("GetEpisode without blob data = %v, want the episode", err)
			}
		})
		for _, req := range []*pb.ExportRolloutRequest{
			{RolloutId: rollout, Format: pb.ExportFormat_EXPORT_FORMAT_JSONL, InlineImages: true},
			{RolloutId: rollout, Format: pb.ExportFormat_EXPORT_FORMAT_OSWORLD},
		} {
			t.Run(tc.name+"/"+req.GetFormat().String(), func(t *testing.T) {
				stream, err := c.ExportRollout(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				var sent []byte
				for {
					m, err := stream.Recv()
					if errors.Is(err, io.EOF) {
						t.Fatal("export of a rollout with a damaged blob succeeded")
					}
					if err != nil {
						if status.Code(err) != codes.DataLoss {
							t.Errorf("export = %v, want DataLoss", err)
						}
						break
					}
					sent = append(sent, m.GetData()...)
				}
				if bytes.Contains(sent, d.flippedOnDisk[900:1100]) {
					t.Error("export sent bytes of the damaged blob")
				}
			})
		}
	}
	t.Run("intact", func(t *testing.T) {
		got, _, err := blobBytes(t, ctx, c, sha(d.intact))
		if err != nil || !bytes.Equal(got, d.intact) {
			t.Errorf("GetBlob of the intact blob = %d bytes, %v; want its %d bytes", len(got), err, len(d.intact))
		}
		i := 3 - d.flippedIdx - d.cutIdx
		if _, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: damagedRollout(i) + "-e", IncludeSteps: true, InlineBlobs: true}); err != nil {
			t.Errorf("GetEpisode inline of the intact blob's episode = %v", err)
		}
	})
	if got := counterValue(t, env, "rolloutmesh_storage_blob_corrupt_total"); got != 8 {
		t.Errorf("rolloutmesh_storage_blob_corrupt_total = %v, want 8 (2 blobs x GetBlob, inline, 2 exports)", got)
	}
}

// counterValue reads a counter from the service's registry.
func counterValue(t *testing.T, env daemon.Env, name string) float64 {
	t.Helper()
	mfs, err := env.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// TestStartRefusesBadIndex: an index that is not a regular file, or not a
// database, stops the start with an error naming the file; a FIFO must not
// block the start.
func TestStartRefusesBadIndex(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a database "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, index, want string
	}{
		{"fifo", fifo, "named pipe"},
		{"garbage", garbage, "not a database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := daemontest.Env(t)
			done := make(chan error, 1)
			go func() {
				svc, err := storage.New(context.Background(), storage.Config{Index: tc.index, Blobs: filepath.Join(dir, "blobs")}, env)
				if err == nil {
					svc.Close(context.Background())
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.index) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("storage.New = %v, want an error naming %s and saying %q", err, tc.index, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("storage.New blocked on the index")
			}
		})
	}
}

// TestReadNeverPastRecordedSize: a store's reader is outside data. Where
// an old-layout blob file (read whole, not as a section of a pack) has
// grown far past the size the index recorded, or is a FIFO, a read takes
// at most one byte more than recorded and answers DataLoss, at once.
func TestReadNeverPastRecordedSize(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	idx, err := index.Open(ctx, filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []index.BlobRecord
	for i, kind := range []string{"huge", "fifo"} {
		data := []byte("old screenshot " + kind)
		rec := index.BlobRecord{SHA256: sha(data), Size: int64(len(data)), MediaType: "image/png"} // Loc "": one file per blob
		recs = append(recs, rec)
		path := filepath.Join(dir, "blobs", rec.SHA256[:1], rec.SHA256)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		switch kind {
		case "huge":
			// 64 GiB of sparse zeros after the real content.
			if err := os.WriteFile(path, data, 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, 64<<30); err != nil {
				t.Skipf("sparse file: %v", err)
			}
		case "fifo":
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}
		st := step(fmt.Sprintf("old-e%d", i), 0, nil, 1)
		st.Observation.Screenshot = &pb.BlobRef{Sha256: rec.SHA256, MediaType: rec.MediaType, Size: rec.Size}
		if _, err := idx.Commit(ctx, []*index.Batch{{
			Episodes: []index.EpisodeRecord{{Episode: episode("old", st.GetEpisodeId(), "g", "t", "os", 0)}},
			Steps:    []index.StepRecord{{Step: st, Blobs: []index.BlobRecord{rec}, Attempt: 1}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	idx.Close()

	c := startService(t, storage.Config{Index: filepath.Join(dir, "index.db"), Blobs: filepath.Join(dir, "blobs")})
	for _, rec := range recs {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		data, msgs, err := blobBytes(t, cctx, c, rec.SHA256)
		cancel()
		if status.Code(err) != codes.DataLoss || len(msgs) != 0 {
			t.Errorf("GetBlob %s = %d messages, %d bytes, %v; want DataLoss and nothing sent", rec.SHA256, len(msgs), len(data), err)
		}
	}
}

// TestLargeReadsAreBounded: one call cannot make the server hold an
// unbounded amount of stored data. A ListEpisodes page of episodes with
// multi-megabyte headers ends early with a token to the rest; GetEpisode
// of an episode whose steps exceed a gRPC message is FailedPrecondition,
// refused before they are all read.
func TestLargeReadsAreBounded(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	c := startService(t, storage.Config{Index: filepath.Join(dir, "index.db"), Blobs: filepath.Join(dir, "blobs")})
	big := strings.Repeat("x", 3500<<10)
	var msgs []*pb.AppendStepsRequest
	for i := range 6 {
		e := episode("rbig", fmt.Sprintf("rbig-e%d", i), "g", "t", "os", i)
		e.Instruction = big
		msgs = append(msgs, epMsg(e))
	}
	for i := range 20 {
		st := step("rbig-e0", int32(i), nil, 1)
		st.Observation = nil
		st.ModelCall.ResponseText = big
		msgs = append(msgs, stepMsg(st))
	}
	if _, err := appendAll(ctx, c, msgs...); err != nil {
		t.Fatalf("AppendSteps: %v", err)
	}

	var pages []int
	token := ""
	for {
		resp, err := c.ListEpisodes(ctx, &pb.ListEpisodesRequest{RolloutId: "rbig", PageSize: 100, PageToken: token})
		if err != nil {
			t.Fatalf("ListEpisodes: %v", err)
		}
		pages = append(pages, len(resp.GetEpisodes()))
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(pages) < 2 || pages[0] >= 6 || sum(pages) != 6 {
		t.Errorf("ListEpisodes pages of 21 MB of episodes = %v; want several, 6 episodes in all", pages)
	}

	_, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: "rbig-e0", IncludeSteps: true})
	wantCode(t, err, codes.FailedPrecondition, "rbig-e0")
	if _, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: "rbig-e0"}); err != nil {
		t.Errorf("GetEpisode without steps = %v", err)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestFsckRepairsSummary: fsck names the rollouts whose summary row
// differs from their episodes and says how to repair it; with
// --repair-summary it recounts them (and only them), after which the
// check finds the summary intact.
func TestFsckRepairsSummary(t *testing.T) {
	d := newDamagedStore(t)
	db, err := sql.Open("sqlite", d.cfg.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE rollouts SET episodes = 5 WHERE rollout_id = '` + damagedRollout(1) + `'`,
		`DELETE FROM rollouts WHERE rollout_id = '` + damagedRollout(2) + `'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	summaryProblems := func(rep storage.FsckReport) []string {
		var ids []string
		for _, p := range rep.IndexProblems {
			if id, ok := strings.CutPrefix(p, index.SummaryMismatch+": "); ok {
				ids = append(ids, id)
			}
		}
		return ids
	}
	report := func(extra ...string) storage.FsckReport {
		out, _ := d.fsck(t, append([]string{"--json"}, extra...)...)
		var rep storage.FsckReport
		if err := json.NewDecoder(strings.NewReader(out)).Decode(&rep); err != nil {
			t.Fatalf("fsck --json %q output does not decode: %v\n%s", extra, err, out)
		}
		return rep
	}
	damaged := []string{damagedRollout(1), damagedRollout(2)}

	if got := summaryProblems(report()); !slices.Equal(got, damaged) {
		t.Errorf("summary problems found = %q, want %q", got, damaged)
	}
	if out, _ := d.fsck(t); !strings.Contains(out, "--repair-summary") {
		t.Errorf("text report does not point to --repair-summary:\n%s", out)
	}
	rep := report("--repair-summary")
	if !slices.Equal(rep.Repaired, damaged) || len(summaryProblems(rep)) != 0 {
		t.Errorf("fsck --repair-summary: repaired %q, summary problems %q; want %q repaired and none left", rep.Repaired, summaryProblems(rep), damaged)
	}
	// The blob damage is still reported: only the summary is repaired.
	if rep.OK || len(rep.BlobProblems) != 2 {
		t.Errorf("fsck --repair-summary: ok %v, %d blob problems; want the 2 damaged blobs still reported", rep.OK, len(rep.BlobProblems))
	}
	if rep := report(); len(rep.Repaired) != 0 || len(summaryProblems(rep)) != 0 {
		t.Errorf("fsck after the repair: repaired %q, summary problems %q; want neither", rep.Repaired, summaryProblems(rep))
	}
}
