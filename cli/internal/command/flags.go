package command

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
)

// meshFlags are the flags of the embedded mesh, which `rollout run` and
// `rollout up` share: its VMs, its model and its data.
type meshFlags struct {
	numRollouts, numVMs                    int
	warmSpares                             int
	headless                               bool
	provider, pathToVM, snapshot, password string
	screenW, screenH                       int
	vmCPUs, vmMemoryMB                     int
	model, baseURL                         string
	serve                                  serveFlags
	dataDir                                string
	taskRoots                              stringList
	fakeScript, logLevel                   string
	ragCorpus, webDocs, webSearchURL       string
	cacheDir                               string
	offline                                bool
	googleSettings                         string
	client                                 clientFlags
}

func (f *meshFlags) register(fs *flag.FlagSet, tokenUsage, taskRootUsage string) {
	fs.IntVar(&f.numRollouts, "num-rollouts", 5, "parallel episodes (runner slots, N)")
	fs.IntVar(&f.numVMs, "num-vms", 3, "VM pool size (M), desktop tasks only")
	fs.IntVar(&f.warmSpares, "warm-spares", autoWarmSpares, "VMs booted beyond --num-vms so that a reset never holds up the next episode; -1 sizes them from N, M and the provider's reset time (docs/configuration.md)")
	fs.StringVar(&f.provider, "provider", "process", "VM provider: process (local desktopd + Xvfb), docker, qemu (a qcow2 image, snapshot reset), vmware, virtualbox; also --provider_name")
	fs.StringVar(&f.pathToVM, "path-to-vm", "", "VM image or .vmx path (docker: image; qemu: qcow2, default .cache/guest/desktop.qcow2; vmware/virtualbox: the VM)")
	fs.StringVar(&f.snapshot, "snapshot-name", "init_state", "snapshot the VM is reset to")
	fs.IntVar(&f.screenW, "screen-width", 1280, "guest screen width")
	fs.IntVar(&f.screenH, "screen-height", 720, "guest screen height")
	fs.IntVar(&f.vmCPUs, "vm-cpus", 0, "CPUs of each VM (qemu: -smp; docker: a CPU limit; process VMs are not limited); 0: the provider's default (qemu 1, docker none)")
	fs.IntVar(&f.vmMemoryMB, "vm-memory-mb", 0, "memory of each VM in MB (qemu: -m; docker: a memory limit; process VMs are not limited); 0: the provider's default (qemu 1024, docker none)")
	fs.BoolVar(&f.headless, "headless", true, "run VMs without a visible display")
	fs.StringVar(&f.password, "client-password", "password", "guest user password ({CLIENT_PASSWORD} in task steps)")
	fs.StringVar(&f.model, "model", envOr("ROLLOUTMESH_MODEL", ""), "model name (default: the one the model server lists, when it lists one; fake-model for the stand-in)")
	fs.StringVar(&f.baseURL, "model-base-url", os.Getenv("OPENAI_BASE_URL"), "OpenAI-compatible server (vLLM, SGLang, OpenAI), checked before anything starts; default $OPENAI_BASE_URL, key $OPENAI_API_KEY; empty runs the scripted stand-in")
	f.serve.register(fs)
	fs.StringVar(&f.dataDir, "data-dir", ".rolloutmesh", "where the embedded mesh keeps its databases, blobs and VM homes")
	fs.Var(&f.taskRoots, "task-root", taskRootUsage)
	fs.StringVar(&f.fakeScript, "fake-script", "", "fakellm script for the stand-in policy (default examples/fakellm/demo.jsonl above the data or working directory)")
	fs.StringVar(&f.logLevel, "log-level", "error", "log level of the embedded services: debug, info, warn, error")
	fs.StringVar(&f.ragCorpus, "rag-corpus", "", "corpus of rag tasks: a directory of .txt/.md files or a JSONL of {id,title,text}")
	fs.StringVar(&f.webDocs, "web-docs", "", "local collection of web tasks: JSONL of {url,title,text}")
	fs.StringVar(&f.webSearchURL, "web-search-url", "", "HTTP search endpoint of web tasks (GET ?q=, JSON [{title,url,snippet}])")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "OSWorld task files and the download cache (<cache-dir>/downloads, filled by `rollout cache`); default <data-dir>/runner/cache")
	fs.BoolVar(&f.offline, "offline", false, "fail OSWorld tasks whose files are not in the download cache, naming the URL, instead of downloading them")
	fs.StringVar(&f.googleSettings, "google-settings", "", "folder of OSWorld's Google settings (googledrive/settings.yml with its credentials, google/settings.json) for the tasks that use a Google account; empty refuses those tasks by name")
	f.client.register(fs, tokenUsage)
}

// validate checks the mesh flags before anything starts, in the words of
// the flags.
func (f *meshFlags) validate() error {
	switch {
	case f.numRollouts < 1:
		return fmt.Errorf("--num-rollouts must be at least 1, not %d", f.numRollouts)
	case f.numVMs < 1:
		return fmt.Errorf("--num-vms must be at least 1, not %d", f.numVMs)
	case f.warmSpares < autoWarmSpares:
		return fmt.Errorf("--warm-spares must be -1 (sized automatically) or at least 0, not %d", f.warmSpares)
	case f.numVMs+max(f.warmSpares, 0) > maxPoolVMs:
		return fmt.Errorf("--num-vms + --warm-spares must be at most %d, not %d", maxPoolVMs, f.numVMs+f.warmSpares)
	case !slices.Contains(providers, f.provider):
		return fmt.Errorf("--provider %q is not a VM provider: want %s", f.provider, strings.Join(providers, ", "))
	case f.screenW < 1 || f.screenW > 16384 || f.screenH < 1 || f.screenH > 16384:
		return fmt.Errorf("--screen-width and --screen-height must be between 1 and 16384, not %dx%d", f.screenW, f.screenH)
	case f.vmCPUs < 0 || f.vmCPUs > 1024:
		return fmt.Errorf("--vm-cpus must be between 0 (the provider's default) and 1024, not %d", f.vmCPUs)
	case f.vmMemoryMB != 0 && (f.vmMemoryMB < 128 || f.vmMemoryMB > 1<<20):
		return fmt.Errorf("--vm-memory-mb must be 0 (the provider's default) or between 128 and 1048576, not %d", f.vmMemoryMB)
	}
	if _, err := zapcore.ParseLevel(f.logLevel); err != nil {
		return fmt.Errorf("--log-level %q is not a level: want debug, info, warn or error", f.logLevel)
	}
	if f.baseURL != "" {
		u, err := url.Parse(f.baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--model-base-url %q is not an http(s) URL such as http://127.0.0.1:8000/v1", f.baseURL)
		}
	}
	if err := f.serve.validate(f.baseURL); err != nil {
		return err
	}
	for _, p := range []struct{ flag, path string }{{"--rag-corpus", f.ragCorpus}, {"--web-docs", f.webDocs}, {"--fake-script", f.fakeScript}} {
		if p.path == "" {
			continue
		}
		if _, err := os.Stat(p.path); err != nil {
			return fmt.Errorf("%s: %w", p.flag, err)
		}
	}
	if f.webSearchURL != "" {
		u, err := url.Parse(f.webSearchURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--web-search-url %q is not an http(s) URL", f.webSearchURL)
		}
	}
	return nil
}

// serveFlags make the gateway start the model servers itself, as the
// seeds' ModelServicePool does: --model-path and --serve-cmd.
type serveFlags struct {
	modelPath, cmd, ports, gpus, logDir string
	replicas                            int
	startupTimeout                      time.Duration
	checkpointDir, checkpointPattern    string
}

// defaultServeCmd is vLLM's OpenAI server.
const defaultServeCmd = "vllm serve {model} --host {host} --port {port} --served-model-name {name}"

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.modelPath, "model-path", "", "weights the launched model servers load ({model} in --serve-cmd); with it the gateway starts the servers itself")
	fs.StringVar(&f.cmd, "serve-cmd", "", "command that starts one OpenAI-compatible server, with {model}, {port}, {host} and {name} (the served model name, --model or --model-path); run without a shell; default with --model-path: "+defaultServeCmd)
	fs.IntVar(&f.replicas, "serve-replicas", 1, "model servers to launch")
	fs.StringVar(&f.gpus, "serve-gpus", "", "CUDA_VISIBLE_DEVICES per launched server, ';'-separated, one set per replica (e.g. 0,1;2,3)")
	fs.StringVar(&f.ports, "serve-ports", "18001-18064", "port range of the launched servers (ports in use are skipped)")
	fs.DurationVar(&f.startupTimeout, "serve-startup-timeout", 10*time.Minute, "how long a launched server may take to load and list the model")
	fs.StringVar(&f.logDir, "serve-log-dir", "", "log files of the launched servers (default <data-dir>/model-logs)")
	fs.StringVar(&f.checkpointDir, "checkpoint-dir", "", "watch this directory and load each new complete checkpoint (a directory holding a COMPLETE file) into the servers")
	fs.StringVar(&f.checkpointPattern, "checkpoint-pattern", "*", "names of checkpoints in --checkpoint-dir (the last number in a name is its version)")
}

// launching reports whether the gateway launches the servers.
func (f *serveFlags) launching() bool { return f.cmd != "" || f.modelPath != "" }

func (f *serveFlags) validate(baseURL string) error {
	if !f.launching() {
		if f.checkpointDir != "" && baseURL == "" {
			return errors.New("--checkpoint-dir needs model servers: give --model-path (and --serve-cmd) or --model-base-url")
		}
		return nil
	}
	if baseURL != "" {
		return errors.New("--model-base-url and --model-path/--serve-cmd exclude each other: the first names a running server, the others start one")
	}
	if f.cmd != "" && strings.Contains(f.cmd, "{model}") && f.modelPath == "" {
		return errors.New("--serve-cmd uses {model}: give --model-path")
	}
	if f.checkpointDir != "" {
		if _, err := os.Stat(f.checkpointDir); err != nil {
			return fmt.Errorf("--checkpoint-dir: %w", err)
		}
	}
	lc := f.launch("")
	bc := modelgateway.BackendConfig{ID: "model", Model: "model", Launch: &lc}
	if err := bc.Validate(); err != nil {
		return fmt.Errorf("--serve-*: %w", err)
	}
	return nil
}

// launch is the gateway's launch section for the flags.
func (f *serveFlags) launch(dataDir string) modelgateway.LaunchConfig {
	cmd := f.cmd
	if cmd == "" {
		cmd = defaultServeCmd
	}
	lc := modelgateway.LaunchConfig{
		Command: cmd, ModelPath: f.modelPath, Replicas: f.replicas, Ports: f.ports,
		StartupTimeout: f.startupTimeout, LogDir: f.logDir,
	}
	if lc.LogDir == "" && dataDir != "" {
		lc.LogDir = filepath.Join(dataDir, "model-logs")
	}
	if f.gpus != "" {
		lc.GPUs = strings.Split(f.gpus, ";")
	}
	return lc
}

// servedName is the model name the launched servers serve: --model, else
// the weights path as given (vLLM's default served name).
func (f *serveFlags) servedName(model string) string {
	if model != "" {
		return model
	}
	if f.modelPath != "" {
		return f.modelPath
	}
	return "model"
}

var providers = []string{"process", "docker", "qemu", "vmware", "virtualbox"}

// runFlags are `rollout run`'s flags: the seeds' run_parallel_rollout.py
// parameters under their names (both spellings are accepted: --num-rollouts
// and --num_rollouts), plus the mesh's own.
type runFlags struct {
	meshFlags
	data, envMode, outputDir             string
	groupSize                            int
	usePool                              bool
	actionSpace, observationType, metric string
	maxTurns, maxRetries                 int
	remote                               bool
	coordinator, storageAddr             string
	episodeTimeout                       time.Duration
	name                                 string
	failThreshold                        float64
	tokenIDs                             bool
}

func (f *runFlags) register(fs *flag.FlagSet) {
	f.meshFlags.register(fs, "bearer token of a remote mesh started with --auth-token (with --remote)",
		"directory the coordinator may read task files from (repeatable); default the working directory, and --data's directory always")
	fs.StringVar(&f.data, "data", "", "task file (JSONL or JSON array) or directory (OSWorld evaluation_examples tree, or task files); also --data_path")
	fs.StringVar(&f.envMode, "mode", "osworld", "default env mode of tasks without one: osworld (desktop), math, py, rag, web; also --env_mode")
	fs.StringVar(&f.outputDir, "output-dir", "results", "where trajectories are written (JSONL and OSWorld layout)")
	fs.BoolVar(&f.usePool, "use-vm-pool", true, "share the M VMs among the N slots (the seeds' --use_resource_pool); false gives every slot its own VM")
	fs.StringVar(&f.actionSpace, "action-space", "pyautogui", "action space: "+strings.Join(actionSpaces, ", "))
	fs.StringVar(&f.observationType, "observation-type", "screenshot", "observation: "+strings.Join(observationTypes, ", "))
	fs.IntVar(&f.maxTurns, "max-turns", 15, "maximum agent turns per episode")
	fs.IntVar(&f.maxRetries, "max-retries", 3, "retries per turn for model errors and unparsable answers")
	fs.StringVar(&f.metric, "evaluation-metric", "exact_match", "metric for tasks without an evaluator: "+strings.Join(evalMetrics, ", "))
	fs.IntVar(&f.groupSize, "group-size", 1, "episodes per task (GRPO group size)")
	fs.DurationVar(&f.episodeTimeout, "episode-timeout", 30*time.Minute, "wall-clock limit per episode")
	fs.BoolVar(&f.remote, "remote", false, "run on a running mesh (rollout up, compose) instead of an embedded one")
	fs.StringVar(&f.coordinator, "coordinator", envOr("ROLLOUTMESH_COORDINATOR", "localhost:50052"), "coordinator address with --remote")
	fs.StringVar(&f.storageAddr, "storage", envOr("ROLLOUTMESH_STORAGE", "localhost:50055"), "storage address with --remote")
	fs.StringVar(&f.name, "name", "", "rollout name")
	fs.BoolVar(&f.tokenIDs, "token-ids", true, "record token ids and logprobs with every step, as a trainer needs them (--token-ids=false saves the bytes)")
	fs.Float64Var(&f.failThreshold, "fail-threshold", 0, "exit non-zero when more than this fraction of episodes (0-1) failed for infrastructure reasons (model server, environment, VMs, runners); 0: any such failure, 1: never")
}

// The values the runner accepts (services/runner's actionspace, agent and
// metrics packages, as the coordinator checks them at StartRollout): an
// unknown one is refused here, before a VM starts, rather than by the
// coordinator afterwards.
var (
	envModes         = []string{"osworld", "desktop", "math", "py", "rag", "web"}
	actionSpaces     = []string{"computer_13", "pyautogui", "uitars", "uitars15", "claude_computer_use", "tool_calls"}
	observationTypes = []string{"screenshot", "a11y_tree", "screenshot_a11y_tree"}
	evalMetrics      = []string{"exact_match", "f1_score", "similarity", "contains_answer", "numeric_match", "llm_judgement"}
)

// validate checks every flag of `rollout run` before anything starts.
func (f *runFlags) validate() error {
	if f.data == "" {
		return errors.New("--data is required (a task file or directory)")
	}
	if err := f.meshFlags.validate(); err != nil {
		return err
	}
	oneOf := func(flag, what, v string, want []string) error {
		if slices.Contains(want, v) {
			return nil
		}
		return fmt.Errorf("--%s %q is not %s: want %s", flag, v, what, strings.Join(want, ", "))
	}
	for _, err := range []error{
		oneOf("mode", "an env mode", f.envMode, envModes),
		oneOf("action-space", "an action space", f.actionSpace, actionSpaces),
		oneOf("observation-type", "an observation type", f.observationType, observationTypes),
		oneOf("evaluation-metric", "a metric", f.metric, evalMetrics),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case f.groupSize < 1:
		return fmt.Errorf("--group-size must be at least 1, not %d", f.groupSize)
	case f.maxTurns < 1 || f.maxTurns > 1000:
		return fmt.Errorf("--max-turns must be between 1 and 1000, not %d", f.maxTurns)
	case f.maxRetries < 0 || f.maxRetries > 100:
		return fmt.Errorf("--max-retries must be between 0 and 100, not %d", f.maxRetries)
	case f.episodeTimeout <= 0:
		return fmt.Errorf("--episode-timeout must be positive, not %s", f.episodeTimeout)
	case !(f.failThreshold >= 0 && f.failThreshold <= 1):
		return fmt.Errorf("--fail-threshold must be a fraction between 0 and 1, not %v", f.failThreshold)
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// aliases maps the seeds' alternative flag names to ours.
var aliases = map[string]string{
	"data-path": "data", "env-mode": "mode", "use-resource-pool": "use-vm-pool", "provider-name": "provider",
}

// normalizeArgs turns --num_rollouts into --num-rollouts and applies the
// aliases, so both spellings of every seed flag work. It knows fs's flags
// so that a flag's value is never taken for a flag: in
// `--num-rollouts -3` the -3 stays a value (and is refused as one).
func normalizeArgs(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		val, hasVal := "", false
		if k, v, ok := strings.Cut(name, "="); ok {
			name, val, hasVal = k, "="+v, true
		}
		name = strings.ReplaceAll(name, "_", "-")
		if to, ok := aliases[name]; ok {
			name = to
		}
		out = append(out, "--"+name+val)
		if fl := fs.Lookup(name); fl != nil && !hasVal && !isBoolFlag(fl) && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

func isBoolFlag(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// checkModeData refuses tasks whose mode needs what the flags do not give
// (modes: tasks per env mode; nil when unknown), rather than failing every
// one of them with "no corpus configured", or the rollout once the mesh and
// its VMs have started.
func (f *runFlags) checkModeData(modes map[string]int) error {
	if n := modes["desktop"]; n > 0 && f.actionSpace == "tool_calls" {
		return fmt.Errorf("%s on a desktop, which --action-space tool_calls cannot drive: give a desktop action space (%s) or --mode math, py, rag or web for tasks without env_mode",
			tasksRun(n), strings.Join(actionSpaces[:len(actionSpaces)-1], ", "))
	}
	if n := modes["rag"]; n > 0 && f.ragCorpus == "" {
		return fmt.Errorf("%s in rag mode, which searches a corpus: give --rag-corpus (a directory of .txt/.md files or a JSONL of {id,title,text}, as examples/rag/corpus)", tasksRun(n))
	}
	if n := modes["web"]; n > 0 && f.webDocs == "" && f.webSearchURL == "" {
		return fmt.Errorf("%s in web mode, which searches the web: give --web-docs (a JSONL of {url,title,text}, as examples/web/docs.jsonl) or --web-search-url", tasksRun(n))
	}
	return nil
}

// tasksRun is "1 task runs" or "n tasks run".
func tasksRun(n int) string {
	if n == 1 {
		return "1 task runs"
	}
	return fmt.Sprintf("%d tasks run", n)
}
