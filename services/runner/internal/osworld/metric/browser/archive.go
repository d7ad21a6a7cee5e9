package browser

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// peers finds another family's metric by name: compare_archive compares
// the files it unpacks with them. The osworld package, which joins every
// family, sets it (SetPeers); this package cannot import the families
// without depending on all of them.
var peers func(name string) (metric.Func, bool)

// SetPeers gives compare_archive the registry it compares unpacked files
// with.
func SetPeers(lookup func(name string) (metric.Func, bool)) { peers = lookup }

// archiveCompare maps compare_archive's file_type to the metric OSWorld
// compares each pair of unpacked files with.
var archiveCompare = map[string]string{
	"text": "compare_text_file", "pdf": "compare_pdfs", "docx": "compare_docx_files",
	"ppt": "compare_pptx_files", "image": "compare_images", "csv": "compare_csv",
	"table": "compare_table", "audio": "compare_audios", "video": "compare_videos",
}

// Limits of an unpacked archive: a task's archive is a few documents, and a
// hostile one must not fill the disk (a zip bomb). shutil unpacks any
// size, so an archive past them is not scored (metric.ErrOverCap).
const (
	maxArchiveBytes   = 1 << 30
	maxArchiveEntries = 10000
)

// metricCompareArchive is compare_archive: both archives are unpacked, the
// sorted names under option file_path must be equal, and the score is the
// mean of file_type's metric over the pairs, with the other options passed
// on.
func metricCompareArchive(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	pred, _ := result.(string)
	if pred == "" {
		return 0, nil
	}
	gold, ok := expected.(string)
	if !ok || gold == "" {
		return 0, errors.New("compare_archive: expected archive missing")
	}
	sub, _ := opts["file_path"].(string)
	fileType := "text"
	if v, ok := opts["file_type"].(string); ok {
		fileType = v
	}
	name, ok := archiveCompare[fileType]
	if !ok {
		return 0, fmt.Errorf("compare_archive: file type %q is not supported", fileType)
	}
	if peers == nil {
		return 0, errors.New("compare_archive: no metric registry to compare files with")
	}
	compare, ok := peers(name)
	if !ok {
		return 0, fmt.Errorf("compare_archive: metric %s is not implemented", name)
	}
	rest := map[string]any{}
	for k, v := range opts {
		if k != "file_path" && k != "file_type" {
			rest[k] = v
		}
	}
	tmp, err := os.MkdirTemp("", "compare-archive-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	pd, gd := filepath.Join(tmp, "pred"), filepath.Join(tmp, "gold")
	if err := unpack(pred, pd); err != nil {
		// OSWorld raises on an archive it cannot unpack; the agent's broken
		// archive is a failed task. One over the limits is not judged.
		return 0, metric.Because(ctx, err)
	}
	if err := unpack(gold, gd); err != nil {
		return 0, fmt.Errorf("compare_archive: expected archive: %w", err)
	}
	pf, err := listNames(filepath.Join(pd, sub))
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	gf, err := listNames(filepath.Join(gd, sub))
	if err != nil {
		return 0, fmt.Errorf("compare_archive: expected archive: %w", err)
	}
	if !slices.Equal(pf, gf) {
		return 0, nil
	}
	if len(pf) == 0 {
		// OSWorld divides by zero here; two empty folders share nothing to
		// score.
		return 0, nil
	}
	for i := range pf {
		for _, p := range []string{filepath.Join(pd, sub, pf[i]), filepath.Join(gd, sub, gf[i])} {
			if err := raisesOn(fileType, p); err != nil {
				// The whole metric raises in OSWorld, whatever the other
				// pairs score.
				return 0, metric.Because(ctx, fmt.Errorf("OSWorld's %s raises on %s: %w", name, pf[i], err))
			}
		}
	}
	total := 0.0
	for i := range pf {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		s, err := compare(ctx, filepath.Join(pd, sub, pf[i]), filepath.Join(gd, sub, gf[i]), true, rest)
		if err != nil {
			return 0, fmt.Errorf("compare_archive: %s: %w", pf[i], err)
		}
		total += s
	}
	return total / float64(len(pf)), nil
}

// raisesOn says why the metric OSWorld compares fileType files with
// raises on p, where it does not catch what it raises: compare_text_file
// opens a folder or reads text that is not UTF-8, and compare_pptx_files
// and compare_images open a folder. The other metrics catch such errors
// and score the pair 0, as ours do.
func raisesOn(fileType, p string) error {
	switch fileType {
	case "text", "ppt", "image":
	default:
		return nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return errors.New("a folder")
	}
	if fileType == "text" {
		if _, _, err := metric.ReadPyText(p); err != nil {
			return err
		}
	}
	return nil
}

func listNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	slices.Sort(names)
	return names, nil
}

// unpack extracts an archive by its name's extension, as
// shutil.unpack_archive does (zip, tar, tar.gz/tgz, tar.bz2/tbz2).
func unpack(archive, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	lower := strings.ToLower(archive)
	if strings.HasSuffix(lower, ".zip") {
		return unzip(archive, dst)
	}
	f, err := boundedread.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	switch {
	case strings.HasSuffix(lower, ".tar.gz"), strings.HasSuffix(lower, ".tgz"):
		gz, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		defer gz.Close()
		r = gz
	case strings.HasSuffix(lower, ".tar.bz2"), strings.HasSuffix(lower, ".tbz2"):
		r = bzip2.NewReader(f)
	case strings.HasSuffix(lower, ".tar"):
	default:
		return fmt.Errorf("%s is not a known archive format", filepath.Base(archive))
	}
	return untar(r, dst)
}

// safeJoin places an entry name under dst, refusing names that leave it.
func safeJoin(dst, name string) (string, error) {
	clean := filepath.Clean("/" + filepath.FromSlash(name))
	if clean == "/" {
		return "", fmt.Errorf("empty entry name")
	}
	return filepath.Join(dst, clean), nil
}

// budget counts what an extraction has written.
type budget struct{ bytes, entries int64 }

func (b *budget) entry() error {
	if b.entries++; b.entries > maxArchiveEntries {
		return fmt.Errorf("archive has more than %d entries: %w", maxArchiveEntries, metric.ErrOverCap)
	}
	return nil
}

func (b *budget) copy(p string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, maxArchiveBytes-b.bytes+1))
	b.bytes += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && b.bytes > maxArchiveBytes {
		err = fmt.Errorf("archive unpacks to more than %d bytes: %w", maxArchiveBytes, metric.ErrOverCap)
	}
	return err
}

func unzip(archive, dst string) error {
	zr, err := zip.OpenReader(archive)
	if err != nil {
		return err
	}
	defer zr.Close()
	var b budget
	for _, zf := range zr.File {
		if err := b.entry(); err != nil {
			return err
		}
		// shutil leaves out a name that starts with "/" or holds ".."
		// anywhere, makes a folder of one that ends in "/", and writes any
		// other as a file (a symlink's target as its text).
		if strings.HasPrefix(zf.Name, "/") || strings.Contains(zf.Name, "..") || zf.Name == "" {
			continue
		}
		p := filepath.Join(dst, filepath.FromSlash(zf.Name))
		if strings.HasSuffix(zf.Name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			return err
		}
		err = b.copy(p, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func untar(r io.Reader, dst string) error {
	tr := tar.NewReader(r)
	var b budget
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := b.entry(); err != nil {
			return err
		}
		p, err := safeJoin(dst, h.Name)
		if err != nil {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := b.copy(p, tr); err != nil {
				return err
			}
		}
	}
}
