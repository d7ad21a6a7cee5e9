// Package command implements the subcommands of the rollout binary.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
)

// usageError marks errors caused by bad arguments (exit code 2).
type usageError struct{ error }

// ExitCode maps an error from Run to a process exit code.
func ExitCode(err error) int {
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

type subcommand struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func subcommands() map[string]subcommand {
	return map[string]subcommand{
		"leases":   {"list the VM leases of a running mesh", cmdLeases},
		"vms":      {"list the VMs of a running mesh with their state", cmdVMs},
		"rollouts": {"list rollouts with progress (or show one: rollouts ID)", cmdRollouts},
		"stats":    {"success rates per domain and failure reasons of rollouts", cmdStats},
		"compare":  {"tasks whose reward differs between two rollouts", cmdCompare},
		"export":   {"write a rollout as JSONL and in OSWorld's results layout", cmdExport},
		"run":      {"run a rollout of a task file on the embedded mesh (run_parallel_rollout.py)", cmdRun},
		"up":       {"run the all-in-one mesh as a daemon on the standard ports", cmdUp},
		"tasks":    {"check a task set: which tasks this build can run and score (tasks check)", cmdTasks},
		"cache":    {"fill the download cache of OSWorld task files (cache fetch, cache import)", cmdCache},
		"view":     {"open the trajectory viewer (view [ROLLOUT]; --remote for a running mesh, --open for a browser)", cmdView},
	}
}

// Run runs the subcommand named by args[0].
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmds := subcommands()
	if len(args) == 0 {
		usage(stderr, cmds)
		return usageError{errors.New("no command given")}
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout, cmds)
		return nil
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		usage(stderr, cmds)
		return usageError{fmt.Errorf("unknown command %q", args[0])}
	}
	err := cmd.run(ctx, args[1:], stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func usage(w io.Writer, cmds map[string]subcommand) {
	fmt.Fprintln(w, "usage: rollout <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "rollout <command> --help lists a command's flags.")
}
