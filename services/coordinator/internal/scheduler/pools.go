package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/tasksource"
)

// checkPool checks, before a rollout or its added tasks are accepted, that
// their VM episodes can ever be leased: vm_pool exists at vmmanager and its
// provider applies every env_config override asked for (Pool.
// env_config_supported). Without the check each such episode is refused at
// acquire time, attempt after attempt. prefix names the task list in errors
// ("spec.tasks", "tasks"). A vmmanager that cannot be asked is not the
// caller's fault: the check is skipped and the lease path still refuses.
func (e *Engine) checkPool(ctx context.Context, spec *pb.RolloutSpec, tasks []*pb.Task, prefix string) error {
	if e.leases == nil {
		return nil
	}
	var vmTasks []int
	for i, t := range tasks {
		mode := t.GetEnvMode() // t may be nil: AddTasks checks tasks after this
		if mode == "" {
			mode = spec.EnvMode
		}
		if tasksource.NeedsVM(mode) {
			vmTasks = append(vmTasks, i)
		}
	}
	if len(vmTasks) == 0 {
		return nil
	}
	pools, err := e.leases.Pools(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.log.Warn("pool check skipped: vmmanager did not answer", zap.String("pool", spec.VmPool), zap.Error(err))
		return nil
	}
	var pool *pb.Pool
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		names = append(names, p.Name)
		if p.Name == spec.VmPool {
			pool = p
		}
	}
	if pool == nil {
		return &FieldError{Field: "spec.vm_pool", Precondition: true,
			Msg: fmt.Sprintf("vmmanager has no pool %q (have %s)", spec.VmPool, strings.Join(names, ", "))}
	}
	refused := func(ec *pb.EnvConfig) string {
		for _, o := range overrides(ec) {
			if !slices.Contains(pool.EnvConfigSupported, o) {
				return o
			}
		}
		return ""
	}
	unsupported := func(field, o string) error {
		return &FieldError{Field: field + "." + o, Precondition: true,
			Msg: fmt.Sprintf("pool %s (provider %s) does not support this override (supports: %s)", pool.Name, pool.Provider, orNone(pool.EnvConfigSupported))}
	}
	if o := refused(spec.EnvConfig); o != "" {
		return unsupported("spec.env_config", o)
	}
	for _, i := range vmTasks {
		if o := refused(tasks[i].GetEnvConfig()); o != "" {
			return unsupported(fmt.Sprintf("%s[%d].env_config", prefix, i), o)
		}
	}
	return nil
}

// overrides names the overrides ec sets, as Pool.env_config_supported
// lists them.
func overrides(ec *pb.EnvConfig) []string {
	var out []string
	if ec.GetSnapshot() != "" {
		out = append(out, "snapshot")
	}
	if ec.GetProxy() {
		out = append(out, "proxy")
	}
	if ec.GetFixedIp() {
		out = append(out, "fixed_ip")
	}
	if len(ec.GetExtra()) > 0 {
		out = append(out, "extra")
	}
	return out
}

func orNone(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, ", ")
}
