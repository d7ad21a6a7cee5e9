package command

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// remoteFlags are the flags every client command of a running mesh takes.
type remoteFlags struct {
	vmmanager, coordinator, storage string
	client                          clientFlags
	json                            bool
	timeout                         time.Duration
}

func (r *remoteFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.vmmanager, "vmmanager", envOr("ROLLOUTMESH_VMMANAGER", "localhost:50051"), "vmmanager gRPC address")
	fs.StringVar(&r.coordinator, "coordinator", envOr("ROLLOUTMESH_COORDINATOR", "localhost:50052"), "coordinator gRPC address")
	fs.StringVar(&r.storage, "storage", envOr("ROLLOUTMESH_STORAGE", "localhost:50055"), "storage gRPC address")
	r.client.register(fs, "bearer token for services started with --auth-token")
	fs.BoolVar(&r.json, "json", false, "print JSON instead of a table")
	fs.DurationVar(&r.timeout, "timeout", 30*time.Second, "deadline of each call")
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

// parse parses args into fs, accepting flags after positional arguments
// too (`rollout stats ID --json`), which Go's flag package alone stops at.
// Everything after a "--" stays positional.
//
// A bad flag is one sentence (the flag package would follow it with every
// flag's usage); -h and --help print the usage.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				fs.SetOutput(stderr)
				fmt.Fprintf(stderr, "usage of %s:\n", fs.Name())
				fs.PrintDefaults()
				return err
			}
			return usageError{fmt.Errorf("%w (%s --help lists the flags)", err, fs.Name())}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Parsing "--" and the positionals makes fs.Args() return them.
	if err := fs.Parse(append([]string{"--"}, positional...)); err != nil {
		return usageError{err}
	}
	return nil
}

// connect parses a client command's flags, dials the service addr picks and
// returns a context bounded by --timeout; release closes both.
func connect(ctx context.Context, fs *flag.FlagSet, r *remoteFlags, args []string, stderr io.Writer, addr func(*remoteFlags) string) (context.Context, *grpc.ClientConn, func(), error) {
	if err := parse(fs, args, stderr); err != nil {
		return nil, nil, nil, err
	}
	if err := r.client.resolve(fs); err != nil {
		return nil, nil, nil, err
	}
	conn, err := dial(addr(r), r.client)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	return ctx, conn, func() { cancel(); conn.Close() }, nil
}

func vmmanagerAddr(r *remoteFlags) string   { return r.vmmanager }
func coordinatorAddr(r *remoteFlags) string { return r.coordinator }
func storageAddr(r *remoteFlags) string     { return r.storage }

func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: false}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func table(w io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func ago(ts *timestamppb.Timestamp) string {
	if ts == nil || !ts.IsValid() || ts.AsTime().IsZero() {
		return "-"
	}
	return time.Since(ts.AsTime()).Truncate(time.Second).String()
}

func until(ts *timestamppb.Timestamp) string {
	if ts == nil || !ts.IsValid() || ts.AsTime().IsZero() {
		return "-"
	}
	return time.Until(ts.AsTime()).Truncate(time.Second).String()
}

func dur(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	return d.AsDuration().Truncate(time.Second).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func shortState(s fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), prefix))
}

func cmdLeases(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout leases", flag.ContinueOnError)
	var r remoteFlags
	r.register(fs)
	pool := fs.String("pool", "", "only this pool")
	ctx, conn, release, err := connect(ctx, fs, &r, args, stderr, vmmanagerAddr)
	if err != nil {
		return err
	}
	defer release()
	resp, err := pb.NewVMManagerClient(conn).ListLeases(ctx, &pb.ListLeasesRequest{Pool: *pool})
	if err != nil {
		return fmt.Errorf("list leases: %w", err)
	}
	if r.json {
		return printJSON(stdout, resp)
	}
	rows := make([][]string, 0, len(resp.GetLeases()))
	for _, l := range resp.GetLeases() {
		lb := l.GetLabels()
		rows = append(rows, []string{l.GetLeaseId(), l.GetPool(), l.GetVmId(), orDash(lb["rollout"]), orDash(lb["task"]),
			orDash(l.GetHolder()), progress(lb), ago(l.GetAcquireTime()), until(l.GetExpireTime()), endpoints(l)})
	}
	return table(stdout, "LEASE\tPOOL\tVM\tROLLOUT\tTASK\tEPISODE\tSTEP\tRUNNING\tEXPIRES IN\tENDPOINTS", rows)
}

func cmdVMs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout vms", flag.ContinueOnError)
	var r remoteFlags
	r.register(fs)
	pool := fs.String("pool", "", "only this pool")
	ctx, conn, release, err := connect(ctx, fs, &r, args, stderr, vmmanagerAddr)
	if err != nil {
		return err
	}
	defer release()
	resp, err := pb.NewVMManagerClient(conn).ListVMs(ctx, &pb.ListVMsRequest{Pool: *pool})
	if err != nil {
		return fmt.Errorf("list vms: %w", err)
	}
	if r.json {
		return printJSON(stdout, resp)
	}
	rows := make([][]string, 0, len(resp.GetVms()))
	for _, v := range resp.GetVms() {
		rows = append(rows, []string{v.GetVmId(), v.GetPool(), v.GetProvider(), shortState(v.GetState(), "VM_STATE_"),
			orDash(v.GetHolder()), serverEndpoint(v.GetEndpoint(), v.GetPorts()), ago(v.GetCreateTime()), fmt.Sprint(v.GetLeasesServed()), orDash(v.GetLastError())})
	}
	return table(stdout, "VM\tPOOL\tPROVIDER\tSTATE\tHOLDER\tENDPOINT\tAGE\tLEASES\tLAST ERROR", rows)
}

func cmdRollouts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout rollouts", flag.ContinueOnError)
	var r remoteFlags
	r.register(fs)
	ctx, conn, release, err := connect(ctx, fs, &r, args, stderr, coordinatorAddr)
	if err != nil {
		return err
	}
	defer release()
	client := pb.NewCoordinatorClient(conn)
	if id := fs.Arg(0); id != "" {
		ro, err := client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: id, IncludeGroups: true})
		if err != nil {
			return fmt.Errorf("get rollout: %w", err)
		}
		return printJSON(stdout, ro)
	}
	// The coordinator answers in pages; the listing shows them all.
	resp := &pb.ListRolloutsResponse{}
	for token := ""; ; {
		page, err := client.ListRollouts(ctx, &pb.ListRolloutsRequest{PageSize: rolloutsPage, PageToken: token})
		if err != nil {
			return fmt.Errorf("list rollouts: %w", err)
		}
		resp.Rollouts = append(resp.Rollouts, page.Rollouts...)
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if r.json {
		return printJSON(stdout, resp)
	}
	rows := make([][]string, 0, len(resp.GetRollouts()))
	for _, ro := range resp.GetRollouts() {
		p := ro.GetProgress()
		rows = append(rows, []string{ro.GetRolloutId(), orDash(ro.GetSpec().GetName()), shortState(ro.GetState(), "ROLLOUT_STATE_"),
			fmt.Sprint(p.GetQueued()), fmt.Sprint(p.GetRunning()), fmt.Sprint(p.GetDone()), fmt.Sprint(p.GetFailed()),
			fmt.Sprintf("%d/%d", p.GetGroupsComplete(), p.GetGroupsTotal()), pct(p.GetSuccessRate()), dur(p.GetEta()), ago(ro.GetCreateTime())})
	}
	return table(stdout, "ROLLOUT\tNAME\tSTATE\tQUEUED\tRUNNING\tDONE\tFAILED\tGROUPS\tSUCCESS\tETA\tAGE", rows)
}

// rolloutsPage is the page size `rollout rollouts` asks for (the
// coordinator's largest); tests make it small.
var rolloutsPage int32 = 1000

func cmdStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout stats", flag.ContinueOnError)
	var r remoteFlags
	r.register(fs)
	ctx, conn, release, err := connect(ctx, fs, &r, args, stderr, storageAddr)
	if err != nil {
		return err
	}
	defer release()
	if fs.NArg() == 0 {
		return usageError{fmt.Errorf("usage: rollout stats ROLLOUT_ID...")}
	}
	resp, err := pb.NewStorageClient(conn).GetStats(ctx, &pb.GetStatsRequest{RolloutIds: fs.Args()})
	if err != nil {
		return fmt.Errorf("get stats: %w", err)
	}
	if r.json {
		return printJSON(stdout, resp)
	}
	return writeStats(stdout, resp)
}

// writeStats prints the summary tables people read after a rollout: overall
// and per-domain success, and failures by reason.
func writeStats(w io.Writer, resp *pb.GetStatsResponse) error {
	for _, rs := range resp.GetRollouts() {
		fmt.Fprintf(w, "rollout %s: %d episodes, %d steps\n\n", rs.GetRolloutId(), rs.GetOverall().GetEpisodes(), rs.GetSteps())
		rows := [][]string{statsRow("overall", rs.GetOverall())}
		for _, d := range rs.GetByDomain() {
			rows = append(rows, statsRow(d.GetKey(), d))
		}
		if err := table(w, "DOMAIN\tEPISODES\tDONE\tSUCCESS RATE\tMEAN SCORE\tMEAN STEPS", rows); err != nil {
			return err
		}
		if len(rs.GetFailureReasons()) > 0 {
			fmt.Fprintln(w)
			reasons := make([]string, 0, len(rs.GetFailureReasons()))
			for k := range rs.GetFailureReasons() {
				reasons = append(reasons, k)
			}
			sort.Strings(reasons)
			rows := make([][]string, 0, len(reasons))
			for _, k := range reasons {
				rows = append(rows, []string{k, fmt.Sprint(rs.GetFailureReasons()[k])})
			}
			if err := table(w, "FAILURE REASON\tEPISODES", rows); err != nil {
				return err
			}
		}
		fmt.Fprintln(w)
	}
	if len(resp.GetRollouts()) > 1 {
		fmt.Fprintf(w, "mean success rate over %d rollouts: %s ± %s\n", len(resp.GetRollouts()),
			pct(resp.GetMeanSuccessRate()), pct(resp.GetStddevSuccessRate()))
	}
	return nil
}

func statsRow(key string, s *pb.StatsRow) []string {
	return []string{key, fmt.Sprint(s.GetEpisodes()), fmt.Sprint(s.GetDone()), pct(s.GetSuccessRate()),
		fmt.Sprintf("%.3f", s.GetMeanScore()), fmt.Sprintf("%.1f", s.GetMeanSteps())}
}

func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout compare", flag.ContinueOnError)
	var r remoteFlags
	r.register(fs)
	ctx, conn, release, err := connect(ctx, fs, &r, args, stderr, storageAddr)
	if err != nil {
		return err
	}
	defer release()
	if fs.NArg() != 2 {
		return usageError{fmt.Errorf("usage: rollout compare BASE_ROLLOUT_ID OTHER_ROLLOUT_ID")}
	}
	resp, err := pb.NewStorageClient(conn).CompareRollouts(ctx, &pb.CompareRolloutsRequest{BaseRolloutId: fs.Arg(0), OtherRolloutId: fs.Arg(1)})
	if err != nil {
		return fmt.Errorf("compare rollouts: %w", err)
	}
	if r.json {
		return printJSON(stdout, resp)
	}
	rows := make([][]string, 0, len(resp.GetDiffs()))
	opt := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f", *p)
	}
	for _, d := range resp.GetDiffs() {
		rows = append(rows, []string{d.GetDomain(), d.GetTaskId(), opt(d.BaseReward), opt(d.OtherReward)})
	}
	if err := table(stdout, "DOMAIN\tTASK\tBASE\tOTHER", rows); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%d tasks in both, %d improved, %d regressed\n", resp.GetCommonTasks(), resp.GetImproved(), resp.GetRegressed())
	return nil
}

// progress is the episode's step and phase as its runner last reported
// them (the coordinator sets them at lease renewal).
func progress(labels map[string]string) string {
	step, phase := labels["step"], labels["phase"]
	switch {
	case step == "" && phase == "":
		return "-"
	case phase == "":
		return step
	case step == "":
		return phase
	}
	return step + " (" + phase + ")"
}

// hostPrefix marks the host-side addresses a docker pool on a shared
// network records beside its container names (the vmmanager docker
// provider's HostPrefix): "host:server" for the guest server, "host:<name>"
// for the other services. The names resolve only on that network (compose),
// so these are the addresses shown.
const hostPrefix = "host:"

// endpoints lists the guest's server and its other services (Chrome's
// DevTools, VLC, VNC) in name order, each at the address the host reaches
// where the lease has one.
func endpoints(l *pb.Lease) string {
	return userEndpoints(l.GetEndpoint(), l.GetPorts())
}

// serverEndpoint is the guest server's address as the host reaches it.
func serverEndpoint(endpoint string, ports map[string]string) string {
	if h := ports[hostPrefix+"server"]; h != "" {
		return h
	}
	return endpoint
}

func userEndpoints(endpoint string, ports map[string]string) string {
	out := []string{serverEndpoint(endpoint, ports)}
	names := make([]string, 0, len(ports))
	for n := range ports {
		if !strings.HasPrefix(n, hostPrefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		addr := ports[n]
		if h := ports[hostPrefix+n]; h != "" {
			addr = h
		}
		out = append(out, n+"="+addr)
	}
	return strings.Join(out, " ")
}
