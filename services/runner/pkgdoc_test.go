package runner_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs checks that every package of the module has exactly one
// package doc comment (after tailscale's pkgdoc_test).
func TestPackageDocs(t *testing.T) {
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || strings.HasPrefix(d.Name(), "testdata") {
			return err
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		docs, files := 0, 0
		for _, e := range entries {
			n := e.Name()
			if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			files++
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, n), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				return err
			}
			if f.Doc != nil {
				docs++
			}
		}
		if files > 0 && docs != 1 {
			t.Errorf("package %s has %d package doc comments, want 1", dir, docs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
