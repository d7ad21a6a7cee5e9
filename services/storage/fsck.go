package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/envflag"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/blobstore"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
)

// FsckReport is what `storage fsck` found.
type FsckReport struct {
	// Index is the SQLite file checked, or "postgresql".
	Index string `json:"index"`
	// Blobs is the blob directory or s3:// URL checked.
	Blobs string `json:"blobs"`
	// BlobsChecked and BytesChecked count the blobs read and hashed.
	BlobsChecked int   `json:"blobs_checked"`
	BytesChecked int64 `json:"bytes_checked"`
	// IndexProblems is damage to the index itself.
	IndexProblems []string `json:"index_problems"`
	// Repaired lists the rollouts whose summary row --repair-summary
	// recounted from their episodes (no longer damage).
	Repaired []string `json:"repaired,omitempty"`
	// PackProblems is damage to pack files (missing, truncated, not
	// regular) or to the index's view of them.
	PackProblems []blobstore.PackProblem `json:"pack_problems"`
	// BlobProblems lists each stored blob that cannot be read back whole
	// or does not hash to its key.
	BlobProblems []FsckBlobProblem `json:"blob_problems"`
	OK           bool              `json:"ok"`
}

// FsckBlobProblem is one damaged blob.
type FsckBlobProblem struct {
	Hash    string `json:"hash"`
	Pack    string `json:"pack,omitempty"`
	Offset  int64  `json:"offset"`
	Size    int64  `json:"size"`
	Problem string `json:"problem"`
}

// errDamaged makes fsck exit non-zero once the report is written.
var errDamaged = errors.New("damage found")

// Fsck is the `storage fsck` subcommand: an offline check of the index and
// of every stored blob. It writes a report to stdout (JSON with --json) and
// fails, so the process exits 1, when it finds damage.
func Fsck(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("storage fsck", flag.ContinueOnError)
	var cfg Config
	dataDir := fs.String("data-dir", filepath.Join("data", "storage"), "the storage service's data directory")
	fs.StringVar(&cfg.Index, "index", "", "index database: an SQLite file path or a postgres:// DSN (default <data-dir>/index.db)")
	fs.StringVar(&cfg.Blobs, "blobs", "", "blob store: a directory or s3://bucket/prefix (default <data-dir>/blobs)")
	fs.StringVar(&cfg.S3Endpoint, "s3-endpoint", "", "S3-compatible endpoint URL for s3:// blobs")
	fs.StringVar(&cfg.S3Region, "s3-region", "us-east-1", "S3 region")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	repair := fs.Bool("repair-summary", false, "recount from their episodes the rollouts whose summary row differs from them, before the check")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: storage fsck [flags]\n\n"+
			"Checks the index and reads every stored blob back, with the storage service stopped.\n"+
			"Exits 0 when nothing is damaged, 1 when something is or the check cannot run.\n"+
			"With --repair-summary it first recounts the rollouts summary where it differs from the\n"+
			"episodes (it is derived from them); nothing else is repaired.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("fsck: unexpected arguments %q", fs.Args())
	}
	if err := envflag.Apply(fs, daemon.EnvPrefix, os.LookupEnv); err != nil {
		return err
	}
	rep, err := RunFsck(ctx, cfg, *dataDir, FsckOptions{RepairSummary: *repair})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.WriteText(os.Stdout)
	}
	if !rep.OK {
		return fmt.Errorf("fsck: %w: %d index, %d pack and %d blob problems", errDamaged,
			len(rep.IndexProblems), len(rep.PackProblems), len(rep.BlobProblems))
	}
	return nil
}

// FsckOptions are what `storage fsck` may change.
type FsckOptions struct {
	// RepairSummary recounts, before the check, the rollouts whose row
	// in the rollouts summary differs from their episodes.
	RepairSummary bool
}

// RunFsck checks the store cfg and dataDir name, as the service would
// open it. It opens nothing that does not exist, and the only writes it
// can make are applying the schema migrations a newer release brings, as
// the service's own start would, and the summary recount opts asks for.
// An error means the check could not run; the damage it finds is in the
// report.
func RunFsck(ctx context.Context, cfg Config, dataDir string, opts FsckOptions) (FsckReport, error) {
	var rep FsckReport
	indexDSN, blobsLoc := cfg.Index, cfg.Blobs
	if indexDSN == "" {
		indexDSN = filepath.Join(dataDir, "index.db")
	}
	if blobsLoc == "" {
		blobsLoc = filepath.Join(dataDir, "blobs")
		cfg.Blobs = blobsLoc
	}
	rep.Index, rep.Blobs = indexDSN, blobsLoc
	if index.IsPostgresDSN(indexDSN) {
		rep.Index = "postgresql"
	} else if _, err := os.Stat(indexDSN); err != nil {
		return rep, fmt.Errorf("fsck: index: %w", err)
	}
	if blobBackend(cfg) == "files" {
		if _, err := os.Stat(blobsLoc); err != nil {
			return rep, fmt.Errorf("fsck: blobs: %w", err)
		}
	}
	blobs, err := openBlobs(ctx, cfg, dataDir)
	if err != nil {
		return rep, fmt.Errorf("fsck: %w", err)
	}
	idx, err := openIndex(ctx, indexDSN)
	if err != nil {
		// An index that does not open is the damage to report; nothing
		// else can be checked without it.
		rep.IndexProblems = append(rep.IndexProblems, err.Error())
		return rep, nil
	}
	defer idx.Close()
	if opts.RepairSummary {
		if rep.Repaired, err = idx.RepairSummary(ctx); err != nil {
			return rep, fmt.Errorf("fsck: %w", err)
		}
	}
	if rep.IndexProblems, err = idx.Check(ctx); err != nil {
		rep.IndexProblems = append(rep.IndexProblems, err.Error())
		return rep, nil
	}
	if files, ok := blobs.(*blobstore.Files); ok {
		rep.PackProblems, err = files.CheckPacks(ctx, func(fn func(string, int64) error) error {
			return idx.EachBlobLocation(ctx, fn)
		})
		if err != nil {
			return rep, fmt.Errorf("fsck: %w", err)
		}
	}
	err = idx.EachBlob(ctx, func(rec index.BlobRecord) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		rep.BlobsChecked++
		n, problem := checkBlob(ctx, blobs, rec)
		rep.BytesChecked += n
		if problem != "" {
			pack, off := blobstore.DescribeLoc(rec.Loc)
			rep.BlobProblems = append(rep.BlobProblems, FsckBlobProblem{Hash: rec.SHA256, Pack: pack, Offset: off, Size: rec.Size, Problem: problem})
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("fsck: %w", err)
	}
	rep.OK = len(rep.IndexProblems) == 0 && len(rep.PackProblems) == 0 && len(rep.BlobProblems) == 0
	return rep, nil
}

// checkBlob reads a blob back through the store, hashing it as it streams
// (fsck holds no blob in memory), and says what is wrong with it, if
// anything. It never reads more than one byte past the recorded size.
func checkBlob(ctx context.Context, blobs blobStore, rec index.BlobRecord) (int64, string) {
	if !blobstore.ValidKey(rec.SHA256) || rec.Size < 0 {
		return 0, fmt.Sprintf("malformed record: key %q, size %d", rec.SHA256, rec.Size)
	}
	// As the service does, give up on a blob a stalled S3 server holds.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rc, err := blobs.Open(ctx, rec.SHA256, rec.Loc, rec.Size)
	if errors.Is(err, blobstore.ErrNotFound) {
		return 0, "missing from the blob store"
	}
	if err != nil {
		return 0, strings.TrimPrefix(err.Error(), "blob "+rec.SHA256+": ")
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(rc, rec.Size+1))
	switch {
	case err != nil:
		return n, fmt.Sprintf("read: %v", err)
	case n < rec.Size:
		return n, fmt.Sprintf("truncated: %d of %d bytes", n, rec.Size)
	case n > rec.Size:
		return n, fmt.Sprintf("longer than the %d bytes recorded", rec.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != rec.SHA256 {
		return n, "content hashes to " + got
	}
	return n, ""
}

// textLimit bounds the problems of each kind the text report lists; the
// JSON report lists all of them.
const textLimit = 50

// writeItems writes the first textLimit items, one indented line each,
// and how many more there are.
func writeItems[T any](w io.Writer, items []T, line func(T) string) {
	for i, it := range items {
		if i == textLimit {
			fmt.Fprintf(w, "  ... %d more (--json lists all)\n", len(items)-textLimit)
			return
		}
		fmt.Fprintf(w, "  %s\n", line(it))
	}
}

// WriteText writes the report for a person.
func (r FsckReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "storage fsck: index %s, blobs %s\n", r.Index, r.Blobs)
	fmt.Fprintf(w, "checked %d blobs, %d bytes\n", r.BlobsChecked, r.BytesChecked)
	if len(r.Repaired) > 0 {
		fmt.Fprintf(w, "rollouts summary: %d rollouts recounted from their episodes\n", len(r.Repaired))
		writeItems(w, r.Repaired, func(id string) string { return id })
	}
	fmt.Fprintf(w, "index: %d problems\n", len(r.IndexProblems))
	writeItems(w, r.IndexProblems, func(p string) string { return p })
	fmt.Fprintf(w, "packs: %d damaged\n", len(r.PackProblems))
	writeItems(w, r.PackProblems, func(p blobstore.PackProblem) string {
		name := p.Path
		if name == "" {
			name = p.Pack
		}
		return fmt.Sprintf("%s: %s (%d blobs)", name, p.Problem, p.Blobs)
	})
	fmt.Fprintf(w, "blobs: %d damaged\n", len(r.BlobProblems))
	writeItems(w, r.BlobProblems, func(p FsckBlobProblem) string {
		where := "own file"
		if p.Pack != "" {
			where = fmt.Sprintf("pack %s offset %d", p.Pack, p.Offset)
		}
		return fmt.Sprintf("%s (%s, %d bytes): %s", p.Hash, where, p.Size, p.Problem)
	})
	for _, p := range r.IndexProblems {
		if strings.HasPrefix(p, index.SummaryMismatch) {
			fmt.Fprintln(w, "the rollouts summary is derived from the episodes: --repair-summary recounts it")
			break
		}
	}
	if r.OK {
		fmt.Fprintln(w, "OK: no damage found")
	} else {
		fmt.Fprintln(w, "DAMAGED: the blobs listed are refused with DataLoss; restore them from a backup or delete their rollouts")
	}
}
