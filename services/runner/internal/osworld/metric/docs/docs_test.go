package docs

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// resolve turns "@name" into the fixture path dir/name and lists of them
// into lists, leaving other values as they are.
func resolve(dir string, v any) any {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "@") {
			return filepath.Join(dir, x[1:])
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = resolve(dir, e)
		}
		return out
	}
	return v
}

type metricCase struct {
	name             string
	metric           string
	result, expected any
	opts             map[string]any
	want             float64
	wantErr          bool
}

func runMetricCases(t *testing.T, dir string, tests []metricCase) {
	t.Helper()
	table := Metrics()
	for _, tt := range tests {
		t.Run(tt.metric+"/"+tt.name, func(t *testing.T) {
			spec, ok := table[tt.metric]
			if !ok {
				t.Fatalf("metric %s not registered", tt.metric)
			}
			for k := range tt.opts {
				if !containsString(spec.Options, k) {
					t.Errorf("option %q not listed in the spec's Options %v", k, spec.Options)
				}
			}
			got, err := spec.Fn(context.Background(), resolve(dir, tt.result), resolve(dir, tt.expected), tt.expected != nil, tt.opts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("%s = %v, error %v; want error %v", tt.metric, got, err, tt.wantErr)
			}
			if !(math.Abs(got-tt.want) <= 1e-12) {
				t.Errorf("%s(%v, %v, %v) = %v, want %v", tt.metric, tt.result, tt.expected, tt.opts, got, tt.want)
			}
		})
	}
}

func containsString(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// writeCorrupt adds broken inputs next to the fixtures: a text file named
// .docx, a truncated zip, and an empty .odt.
func writeCorrupt(t *testing.T, dir string) {
	t.Helper()
	good, err := os.ReadFile(filepath.Join(dir, "text1.docx"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"corrupt.docx":   []byte("not a zip at all"),
		"truncated.docx": good[:len(good)/2],
		"empty.odt":      nil,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDocumentMetrics(t *testing.T) {
	dir := fixtures(t)
	writeCorrupt(t, dir)
	runMetricCases(t, dir, documentCases())
}

// documentCases are the metric cases over the document fixtures.
func documentCases() []metricCase {
	const cdf = "compare_docx_files"
	b := func(k string, v any) map[string]any { return map[string]any{k: v} }
	return []metricCase{
		{"same text other formatting", cdf, "@text1.docx", "@text1fmt.docx", nil, 1, false},
		{"different text", cdf, "@text1.docx", "@text1diff.docx", nil, 0, false},
		{"blanks ignored by default", cdf, "@text1spaces.docx", "@text1.docx", nil, 1, false},
		{"blanks kept", cdf, "@text1spaces.docx", "@text1.docx", b("ignore_blanks", false), 0, false},
		{"case kept by default", cdf, "@text1upper.docx", "@text1.docx", nil, 0, false},
		{"case ignored", cdf, "@text1upper.docx", "@text1.docx", b("ignore_case", true), 1, false},
		{"case ignored per paragraph", cdf, "@text1upper.docx", "@text1.docx", map[string]any{"ignore_case": true, "ignore_blanks": false}, 1, false},
		{"order kept by default", cdf, "@text1rev.docx", "@text1.docx", nil, 0, false},
		{"order ignored", cdf, "@text1rev.docx", "@text1.docx", b("ignore_order", true), 1, false},
		{"empty paragraph is a blank", cdf, "@text1empty.docx", "@text1.docx", nil, 1, false},
		{"empty paragraph counts per paragraph", cdf, "@text1empty.docx", "@text1.docx", b("ignore_blanks", false), 0, false},
		{"empty lines deleted", cdf, "@text1empty.docx", "@text1.docx", map[string]any{"ignore_blanks": false, "delete_empty_lines": true}, 1, false},
		// "Hello world Second line here" against "... there": LCS 28 of 57.
		{"fuzzy on the joined text", cdf, "@text1.docx", "@text1diff.docx", b("fuzzy_match", true), 56.0 / 57, false},
		{"content only", cdf, "@text1.docx", "@text1diff.docx", b("content_only", true), 56.0 / 57, false},
		// Per paragraph: 1 and 32/33 ("here" in "there").
		{"fuzzy per paragraph", cdf, "@text1.docx", "@text1diff.docx", map[string]any{"fuzzy_match": true, "ignore_blanks": false}, (1 + 32.0/33) / 2, false},
		{"odt pair", cdf, "@text1.odt", "@text1fmt.odt", nil, 1, false},
		{"odt pair differing", cdf, "@text1.odt", "@text1diff.odt", nil, 0, false},
		{"odt against docx", cdf, "@text1.odt", "@text1.docx", nil, 0, false},
		{"result missing", cdf, nil, "@text1.docx", nil, 0, false},
		{"result not on disk", cdf, "@absent.docx", "@text1.docx", nil, 0, false},
		{"result not a zip", cdf, "@corrupt.docx", "@text1.docx", nil, 0, false},
		{"result truncated", cdf, "@truncated.docx", "@text1.docx", nil, 0, false},
		{"odt empty file", cdf, "@empty.odt", "@text1.odt", nil, 0, false},

		{"same cells", "compare_docx_tables", "@tableA.docx", "@tableA2.docx", nil, 1, false},
		{"one cell differs", "compare_docx_tables", "@tableA.docx", "@tableB.docx", nil, 0, false},
		{"column count differs", "compare_docx_tables", "@tableA.docx", "@tableC.docx", nil, 0, false},
		{"no tables in either", "compare_docx_tables", "@text1.docx", "@text1diff.docx", nil, 1, false},
		{"table count differs", "compare_docx_tables", "@text1.docx", "@tableA.docx", nil, 0, false},
		{"corrupt", "compare_docx_tables", "@corrupt.docx", "@tableA.docx", nil, 0, false},

		{"same spacing", "compare_line_spacing", "@ls15b.docx", "@ls15.docx", nil, 1, false},
		{"other spacing", "compare_line_spacing", "@ls20.docx", "@ls15.docx", nil, 0, false},
		{"spacing against none", "compare_line_spacing", "@text1.docx", "@ls15.docx", nil, 0, false},
		{"text differs", "compare_line_spacing", "@text1diff.docx", "@text1.docx", nil, 0, false},

		{"same image", "compare_docx_images", "@img1b.docx", "@img1.docx", nil, 1, false},
		{"other image", "compare_docx_images", "@img2.docx", "@img1.docx", nil, 0, false},
		{"image missing", "compare_docx_images", "@text1.docx", "@img1.docx", nil, 0, false},
		{"no images", "compare_docx_images", "@text1.docx", "@text1diff.docx", nil, 1, false},

		{"empty paragraphs dropped", "compare_docx_files_and_ignore_new_lines", "@text1empty.docx", "@text1.docx", b("ignore_blanks", false), 1, false},
		{"text differs", "compare_docx_files_and_ignore_new_lines", "@text1diff.docx", "@text1.docx", b("ignore_blanks", false), 0, false},
		{"blanks collapsed", "compare_docx_files_and_ignore_new_lines", "@text1spaces.docx", "@text1.docx", nil, 1, false},
		{"odt refused", "compare_docx_files_and_ignore_new_lines", "@text1.odt", "@text1.odt", nil, 0, false},

		{"all runs", "compare_font_names", "@tnr.docx", map[string]any{"font_name": "Times New Roman"}, nil, 1, false},
		{"one run inherits", "compare_font_names", "@tnrpart.docx", map[string]any{"font_name": "Times New Roman"}, nil, 0, false},
		{"other font", "compare_font_names", "@tnr.docx", map[string]any{"font_name": "Arial"}, nil, 0, false},
		{"rules without font_name", "compare_font_names", "@tnr.docx", map[string]any{}, nil, 0, true},

		{"both subscript", "compare_subscript_contains", "@h2o.docx", "@h2o.docx", nil, 1, false},
		{"result plain", "compare_subscript_contains", "@h2oplain.docx", "@h2o.docx", nil, 0, false},

		{"identical", "compare_references", "@refs1.docx", "@refs1.docx", nil, 1, false},
		// Mean ratio (1 + 48/52)/2 = 25/26, scaled above 0.6.
		{"one reference differs", "compare_references", "@refs2.docx", "@refs1.docx", map[string]any{"reference_base_result": 0.6, "content_only": true}, (25.0/26 - 0.6) / 0.4, false},
		{"below the base", "compare_references", "@refs2.docx", "@refs1.docx", b("reference_base_result", 0.99), 0, false},
		{"no references in result", "compare_references", "@refsnone.docx", "@refs1.docx", nil, 0, false},
		{"no references in either", "compare_references", "@refsnone.docx", "@text1.docx", nil, 1, false},
		{"other indicator", "compare_references", "@refs1.docx", "@refs2.docx", b("reference_indicator", "Intro"), (2+48.0/52)/3*2 - 1, false},

		{"deduplicated", "compare_unique_train_records", "@trainGood.docx", []any{"@trainGold.docx", "@trainInit.docx"}, nil, 1, false},
		{"duplicates kept", "compare_unique_train_records", "@trainInit.docx", []any{"@trainGold.docx", "@trainInit.docx"}, nil, 0, false},
		{"line not in the initial file", "compare_unique_train_records", "@trainNew.docx", []any{"@trainGold.docx", "@trainInit.docx"}, nil, 0, false},
		{"record dropped", "compare_unique_train_records", "@trainShort.docx", []any{"@trainGold.docx", "@trainInit.docx"}, nil, 0, false},
		{"expected not a list", "compare_unique_train_records", "@trainGood.docx", "@trainGold.docx", nil, 0, false},

		{"page number", "has_page_numbers_in_footers", "@footer.docx", nil, nil, 1, false},
		{"no footer", "has_page_numbers_in_footers", "@text1.docx", nil, nil, 0, false},
		{"footer without digits", "has_page_numbers_in_footers", "@footertext.docx", nil, nil, 0, false},

		{"italic at 14", "check_italic_font_size_14", "@italic14.docx", "@text1.docx", nil, 1, false},
		{"italic at 12", "check_italic_font_size_14", "@italic12.docx", "@text1.docx", nil, 0, false},
		{"no italic", "check_italic_font_size_14", "@text1.docx", "@text1.docx", nil, 1, false},
		{"text differs", "check_italic_font_size_14", "@italic14.docx", "@text1diff.docx", nil, 0, false},

		{"last paragraph struck", "evaluate_strike_through_last_paragraph", "@strikelast.docx", "@text1.docx", nil, 1, false},
		{"partly struck", "evaluate_strike_through_last_paragraph", "@strikepart.docx", "@text1.docx", nil, 0, false},
		{"not struck", "evaluate_strike_through_last_paragraph", "@text1.docx", "@text1.docx", nil, 0, false},

		{"vowels red, others blue", "evaluate_colored_words_in_tables", "@colors.docx", "@colorsnone.docx", nil, 1, false},
		{"near red within 3.5", "evaluate_colored_words_in_tables", "@colorsnear.docx", "@colorsnone.docx", nil, 1, false},
		{"dark red beyond 3.5", "evaluate_colored_words_in_tables", "@colorsfar.docx", "@colorsnone.docx", nil, 0, false},
		{"dark red within a wide threshold", "evaluate_colored_words_in_tables", "@colorsfar.docx", "@colorsnone.docx", b("threshold", 50.0), 1, false},
		{"vowel blue", "evaluate_colored_words_in_tables", "@colorswrong.docx", "@colorsnone.docx", nil, 0, false},
		{"no colour", "evaluate_colored_words_in_tables", "@colorsnone.docx", "@colorsnone.docx", nil, 0, false},

		{"centered", "is_first_line_centered", "@centered.docx", nil, nil, 1, false},
		{"left", "is_first_line_centered", "@text1.docx", nil, nil, 0, false},
		{"corrupt", "is_first_line_centered", "@corrupt.docx", nil, nil, 0, false},

		{"count matches", "contains_page_break", "@breaks2.docx", map[string]any{"page_break_count": 2.0}, nil, 1, false},
		{"count differs", "contains_page_break", "@breaks2.docx", map[string]any{"page_break_count": 5.0}, nil, 0, false},
		{"any break", "contains_page_break", "@breaks2.docx", map[string]any{}, nil, 1, false},
		{"no break", "contains_page_break", "@text1.docx", map[string]any{}, nil, 0, false},

		{"same stops", "check_tabstops", "@tabsA2.docx", "@tabsA.docx", map[string]any{"word_number_split_by_tabstop": 3.0, "index": 0.0}, 1, false},
		{"word count differs", "check_tabstops", "@tabsA2.docx", "@tabsA.docx", map[string]any{"word_number_split_by_tabstop": 2.0, "index": 0.0}, 0, false},
		// 10 cm against 12 cm (5669 and 6803 twips) on a 9638-twip line.
		{"stop moved", "check_tabstops", "@tabsB.docx", "@tabsA.docx", nil, 1 - 1134.0/9638, false},
		{"alignment differs", "check_tabstops", "@tabsC.docx", "@tabsA.docx", nil, 0, false},
		{"paragraph count differs", "check_tabstops", "@text1empty.docx", "@tabsA.docx", nil, 0, false},

		{"highlight left", "check_highlighted_words", "@highlight.odt", "@plain.odt", nil, 0, false},
		{"highlight removed", "check_highlighted_words", "@plain.odt", "@plain.odt", nil, 1, false},
		{"text differs", "check_highlighted_words", "@text1.odt", "@plain.odt", nil, 0, false},
		{"docx pair", "check_highlighted_words", "@text1.docx", "@text1.docx", nil, 0, false},
	}
}

func TestFindDefaultFont(t *testing.T) {
	dir := fixtures(t)
	// LibreOffice's own registry from the conversion run, with Writer's
	// default font set the way its options dialog records it.
	real, err := os.ReadFile(filepath.Join(dir, "profile", "user", "registrymodifications.xcu"))
	if err != nil {
		t.Fatalf("LibreOffice wrote no registry: %v", err)
	}
	item := `<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard" oor:op="fuse"><value>Times New Roman</value></prop></item>`
	set := strings.Replace(string(real), "</oor:items>", item+"\n</oor:items>", 1)
	for name, data := range map[string]string{"set.xcu": set, "unset.xcu": string(real), "broken.xcu": "<oor:items"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tnr := map[string]any{"font_name": "Times New Roman"}
	runMetricCases(t, dir, []metricCase{
		{"set", "find_default_font", "@set.xcu", tnr, nil, 1, false},
		{"other font", "find_default_font", "@set.xcu", map[string]any{"font_name": "Arial"}, nil, 0, false},
		{"unset", "find_default_font", "@unset.xcu", tnr, nil, 0, false},
		{"broken", "find_default_font", "@broken.xcu", tnr, nil, 0, false},
		{"missing", "find_default_font", nil, tnr, nil, 0, false},
		{"rules without font_name", "find_default_font", "@set.xcu", map[string]any{}, nil, 0, true},
	})
}

func TestRegistered(t *testing.T) {
	want := []string{"compare_docx_files", "compare_docx_tables", "compare_line_spacing", "compare_docx_images",
		"compare_docx_files_and_ignore_new_lines", "compare_font_names", "compare_subscript_contains", "compare_references",
		"compare_unique_train_records", "has_page_numbers_in_footers", "check_italic_font_size_14",
		"evaluate_strike_through_last_paragraph", "evaluate_colored_words_in_tables", "is_first_line_centered",
		"find_default_font", "contains_page_break", "check_tabstops", "check_highlighted_words", "compare_image_text"}
	table := Metrics()
	for _, name := range want {
		if _, ok := table[name]; !ok {
			t.Errorf("%s not registered", name)
		}
	}
	var _ metric.Table = table
}
