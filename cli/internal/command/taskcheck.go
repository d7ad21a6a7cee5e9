package command

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
)

// cmdTasks dispatches `rollout tasks <verb>`.
func cmdTasks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: rollout tasks check --data PATH [--vscode] [--google-settings DIR] [--json]")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return usageError{errors.New("rollout tasks: the only verb is check")}
	}
	return cmdTasksCheck(ctx, args[1:], stdout, stderr)
}

// taskCheck is one task's verdict.
type taskCheck struct {
	ID      string                  `json:"id"`
	Domain  string                  `json:"domain"`
	Mode    string                  `json:"mode"`
	Missing []runner.MissingFeature `json:"missing,omitempty"`
	// Invalid is the parse error of a task the runner would fail.
	Invalid string `json:"invalid,omitempty"`
}

func (t taskCheck) supported() bool { return len(t.Missing) == 0 && t.Invalid == "" }

// checkReport is what `rollout tasks check --json` prints.
type checkReport struct {
	Tasks     int            `json:"tasks"`
	Supported int            `json:"supported"`
	ByDomain  []domainCount  `json:"by_domain"`
	Missing   []missingCount `json:"missing"`
	Details   []taskCheck    `json:"details"`
}

type domainCount struct {
	Domain    string `json:"domain"`
	Tasks     int    `json:"tasks"`
	Supported int    `json:"supported"`
}

type missingCount struct {
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	Reason string   `json:"reason,omitempty"`
	Tasks  int      `json:"tasks"`
	IDs    []string `json:"ids"`
}

// cmdTasksCheck loads a task set as the coordinator would and reports, per
// domain and in all, which tasks the runner can run and score, and for the
// others which step, getter or metric is missing. Desktop tasks are judged
// by the runner's own pre-episode check; tasks of other modes need nothing
// from the OSWorld machinery and count as supported.
func cmdTasksCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout tasks check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "task file or directory (an OSWorld evaluation_examples tree with test_all.json included)")
	index := fs.String("index", "", "the OSWorld index file inside --data (default test_all.json)")
	mode := fs.String("mode", "osworld", "env mode of tasks that name none")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	googleSettings := fs.String("google-settings", "", "folder of OSWorld's Google settings, as rollout run takes it: tasks that use a Google account count as supported with it")
	vscode := fs.Bool("vscode", false, "the guest image has VS Code (built with VSCODE_DEB=/path/to/code.deb make guest-image-full): tasks that run it count as supported; without it they are refused, as the runner refuses them on a guest without code")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if *data == "" {
		return usageError{errors.New("rollout tasks check: --data is required")}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("rollout tasks check: unexpected argument %q", fs.Arg(0))}
	}
	var google *runner.GoogleSettings
	if *googleSettings != "" {
		g, err := runner.LoadGoogleSettings(*googleSettings)
		if err != nil {
			return usageError{fmt.Errorf("--google-settings: %w", err)}
		}
		google = g
	}
	tasks, err := coordinator.LoadTasks(ctx, *data, *index)
	if err != nil {
		return fmt.Errorf("load tasks: %w", err)
	}
	rep := checkReport{Details: make([]taskCheck, 0, len(tasks))}
	for _, t := range tasks {
		c := taskCheck{ID: t.GetId(), Domain: t.GetDomain(), Mode: t.GetEnvMode()}
		if c.Mode == "" {
			c.Mode = *mode
		}
		if c.Domain == "" {
			c.Domain = "-"
		}
		if c.Mode == "desktop" || c.Mode == "osworld" {
			missing, err := runner.CheckOSWorldTaskWith([]byte(t.GetSpecJson()), runner.TaskOffer{Google: google, VSCode: *vscode})
			if err != nil {
				c.Invalid = err.Error()
			}
			c.Missing = missing
		}
		rep.Details = append(rep.Details, c)
	}
	rep.summarise()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.write(stdout)
}

func (r *checkReport) summarise() {
	domains := map[string]*domainCount{}
	missing := map[runner.MissingFeature]*missingCount{}
	for _, c := range r.Details {
		r.Tasks++
		d := domains[c.Domain]
		if d == nil {
			d = &domainCount{Domain: c.Domain}
			domains[c.Domain] = d
		}
		d.Tasks++
		if c.supported() {
			r.Supported++
			d.Supported++
		}
		for _, m := range c.Missing {
			mc := missing[m]
			if mc == nil {
				mc = &missingCount{Kind: m.Kind, Name: m.Name, Reason: m.Reason}
				missing[m] = mc
			}
			mc.Tasks++
			mc.IDs = append(mc.IDs, c.ID)
		}
	}
	for _, d := range domains {
		r.ByDomain = append(r.ByDomain, *d)
	}
	sort.Slice(r.ByDomain, func(i, j int) bool { return r.ByDomain[i].Domain < r.ByDomain[j].Domain })
	for _, m := range missing {
		r.Missing = append(r.Missing, *m)
	}
	sort.Slice(r.Missing, func(i, j int) bool {
		a, b := r.Missing[i], r.Missing[j]
		if a.Tasks != b.Tasks {
			return a.Tasks > b.Tasks
		}
		return a.Kind+a.Name < b.Kind+b.Name
	})
}

func (r *checkReport) write(w io.Writer) error {
	rows := make([][]string, 0, len(r.ByDomain)+1)
	for _, d := range r.ByDomain {
		rows = append(rows, []string{d.Domain, strconv.Itoa(d.Tasks), strconv.Itoa(d.Supported), percent(d.Supported, d.Tasks)})
	}
	rows = append(rows, []string{"total", strconv.Itoa(r.Tasks), strconv.Itoa(r.Supported), percent(r.Supported, r.Tasks)})
	if err := table(w, "DOMAIN\tTASKS\tSUPPORTED\t%", rows); err != nil {
		return err
	}
	if len(r.Missing) > 0 {
		fmt.Fprintln(w)
		rows = rows[:0]
		for _, m := range r.Missing {
			ids := m.IDs
			more := ""
			if len(ids) > 3 {
				ids, more = ids[:3], fmt.Sprintf(" +%d", len(m.IDs)-3)
			}
			rows = append(rows, []string{m.Kind, m.Name, strconv.Itoa(m.Tasks), orDash(m.Reason), strings.Join(ids, ",") + more})
		}
		if err := table(w, "MISSING\tNAME\tTASKS\tREASON\tTASK IDS", rows); err != nil {
			return err
		}
	}
	var invalid []string
	for _, c := range r.Details {
		if c.Invalid != "" {
			invalid = append(invalid, c.ID+": "+c.Invalid)
		}
	}
	if len(invalid) > 0 {
		fmt.Fprintf(w, "\n%d tasks do not parse:\n  %s\n", len(invalid), strings.Join(invalid, "\n  "))
	}
	return nil
}

func percent(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", 100*float64(n)/float64(of))
}
