package command

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// A score of 0 reads the same whether the agent's file held a wrong value
// or was never saved, or did not open. The evaluator notes the second
// kind beside each metric's score (the episode's evaluator details); the
// run's summary counts them, so that a rollout whose zeros are mostly
// "the result getter gave None" says so without opening the viewer.

// Bounds on the zero-score summary: the episodes read, and the kinds of
// note printed.
const (
	maxZeroScan  = 50000
	maxZeroKinds = 5
)

// zeroSummary is why the episodes of one rollout that finished with a
// score of 0 scored it, as their evaluators noted.
type zeroSummary struct {
	n       int64 // episodes DONE with score 0 (read)
	noted   int64 // of them, with a note
	more    bool  // past maxZeroScan, not read
	kinds   map[string]int64
	example map[string]string // a kind's first whole note, with its task
}

// noteKind is what a note says before its detail: up to its first ": "
// (`the result getter "vm_file" gave None`, `report.docx does not open as
// a .docx`), so that the same cause counts once across paths and errors.
func noteKind(note string) string {
	kind, _, _ := strings.Cut(note, ": ")
	return kind
}

// add counts one episode's notes, each kind once.
func (s *zeroSummary) add(ep *pb.Episode) {
	s.n++
	var details struct {
		Notes [][]string `json:"notes"`
	}
	if json.Unmarshal([]byte(ep.GetEvaluatorDetailsJson()), &details) != nil {
		return
	}
	seen := map[string]bool{}
	for _, run := range details.Notes {
		for _, note := range run {
			k := noteKind(note)
			if seen[k] {
				continue
			}
			seen[k] = true
			s.kinds[k]++
			if _, ok := s.example[k]; !ok {
				s.example[k] = strings.Trim(ep.GetDomain()+"/"+ep.GetTaskId(), "/") + ": " + note
			}
		}
	}
	if len(seen) > 0 {
		s.noted++
	}
}

// zeroScores reads the rollout's episodes that finished with a score of 0
// and counts their notes.
func zeroScores(ctx context.Context, store pb.StorageClient, id string) (zeroSummary, error) {
	s := zeroSummary{kinds: map[string]int64{}, example: map[string]string{}}
	zero := 0.0
	for token := ""; ; {
		page, err := store.ListEpisodes(ctx, &pb.ListEpisodesRequest{RolloutId: id, Status: pb.EpisodeStatus_EPISODE_STATUS_DONE,
			MaxScore: &zero, PageSize: 1000, PageToken: token})
		if err != nil {
			return s, fmt.Errorf("list episodes that scored 0: %w", err)
		}
		for _, ep := range page.GetEpisodes() {
			if s.n == maxZeroScan {
				s.more = true
				return s, nil
			}
			s.add(ep)
		}
		if token = page.GetNextPageToken(); token == "" {
			return s, nil
		}
	}
}

// write prints the zeros' notes by kind, the most frequent first.
func (s zeroSummary) write(w io.Writer) {
	if s.n == 0 {
		return
	}
	read := fmt.Sprint(s.n)
	if s.more {
		read = fmt.Sprintf("the first %d", s.n)
	}
	fmt.Fprintf(w, "SCORED 0: %s episodes; the evaluator noted why for %d, and nothing for the rest (a value that did not match)\n", read, s.noted)
	kinds := make([]string, 0, len(s.kinds))
	for k := range s.kinds {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.kinds[b], s.kinds[a]), strings.Compare(a, b))
	})
	for i, k := range kinds {
		if i == maxZeroKinds {
			fmt.Fprintf(w, "  and %d more kinds of note\n", len(kinds)-i)
			break
		}
		fmt.Fprintf(w, "  %5d  %s\n", s.kinds[k], truncateNote(k, 160))
		if ex := s.example[k]; ex != "" {
			fmt.Fprintf(w, "         e.g. %s\n", truncateNote(ex, 240))
		}
	}
}

// truncateNote cuts a note to n bytes at a character boundary.
func truncateNote(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
