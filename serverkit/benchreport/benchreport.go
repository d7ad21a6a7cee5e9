// Package benchreport is the one output format the benchmark commands share
// for their goals: each goal a tab-separated line that `make bench`
// (scripts/bench.sh) collects, over two runs, into the goals table of
// docs/benchmarks.md. The commands still print their own tables for people;
// these lines are the part a script reads.
package benchreport

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Verdict says how a measured figure compares with its goal.
type Verdict string

const (
	// Met: the figure reaches the goal.
	Met Verdict = "met"
	// Missed: the figure falls short of the goal.
	Missed Verdict = "missed"
	// NotJudged: the run could not judge the goal (say why in the figure),
	// e.g. the reference system itself missed it on this machine.
	NotJudged Verdict = "not judged"
)

// Prefix starts every goal line.
const Prefix = "goal\t"

// Goal writes one goal line: an id that stays the same across runs (the
// table's row key), the goal as a reader states it, the measured figure
// with its unit and context, the verdict and the load average at the time.
// Tabs and newlines inside the fields are replaced by spaces so that the
// line stays one record.
func Goal(w io.Writer, id, goal, figure string, v Verdict) {
	fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\n", Prefix, clean(id), clean(goal), clean(figure), v, LoadAvg())
}

// Judge returns Met when ok is true and Missed otherwise.
func Judge(ok bool) Verdict {
	if ok {
		return Met
	}
	return Missed
}

// LoadAvg is /proc/loadavg's 1, 5 and 15 minute averages ("?" when it
// cannot be read): a figure taken while other work competes for the CPUs is
// not comparable with one from a quiet machine, so every report names it.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func clean(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}
