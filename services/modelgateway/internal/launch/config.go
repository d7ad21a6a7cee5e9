// Package launch starts, watches and stops the model servers the gateway
// manages itself (a backend's `launch` section): one process per replica,
// each in its own process group with its own port, environment and log file.
// A replica is announced ready only once it answers its health route and
// lists the served model; a crashed one is restarted with backoff, and a
// crash loop marks it failed with the last lines of its log.
package launch

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultStartupTimeout = 10 * time.Minute
	DefaultGracePeriod    = 30 * time.Second
	DefaultHost           = "127.0.0.1"
	maxReplicas           = 256
	maxCommandBytes       = 16 << 10
)

// RestartConfig bounds restarts of a crashed replica.
type RestartConfig struct {
	// BackoffBase is the wait before the first restart (default 1s); it
	// doubles with each crash in Window, up to BackoffMax (default 1m).
	BackoffBase time.Duration `yaml:"backoff_base"`
	BackoffMax  time.Duration `yaml:"backoff_max"`
	// MaxCrashes within Window mark the replica failed (default 5 in 10m):
	// a server that cannot start is not restarted for ever.
	MaxCrashes int           `yaml:"max_crashes"`
	Window     time.Duration `yaml:"window"`
}

// Config is a backend's `launch` section.
type Config struct {
	// Command is the server's command line, with the placeholders {model}
	// (ModelPath, or the newest checkpoint), {port}, {host} and {name}
	// (the served model name). It is split into words like a shell would
	// ('...', "..." and \ quote) and run without a shell, each placeholder
	// filling part of one word; Shell runs it with /bin/sh -c instead, the
	// values shell-quoted.
	Command string `yaml:"command"`
	Shell   bool   `yaml:"shell"`
	// ModelPath fills {model}.
	ModelPath string `yaml:"model_path"`
	// Replicas is how many servers to run (default 1).
	Replicas int `yaml:"replicas"`
	// Host the servers listen on and the gateway reaches them at (default
	// 127.0.0.1).
	Host string `yaml:"host"`
	// Ports is the range the replicas' ports come from, "18001-18016" or
	// one port; a port something else listens on is skipped.
	Ports string `yaml:"ports"`
	// Env is added to every replica's environment (the gateway's own, less
	// its ROLLOUTMESH_* settings).
	Env map[string]string `yaml:"env"`
	// GPUs sets CUDA_VISIBLE_DEVICES per replica: GPUs[i] for replica i
	// (e.g. ["0,1", "2,3"]). Empty leaves it alone.
	GPUs []string `yaml:"gpus"`
	// ServerAPIKeyEnv names the variable the server reads its API key from
	// (vLLM: VLLM_API_KEY); the backend's key is passed there, never on
	// the command line.
	ServerAPIKeyEnv string `yaml:"server_api_key_env"`
	// StartupTimeout bounds the time to ready (default 10m: vLLM loads
	// weights and compiles for minutes).
	StartupTimeout time.Duration `yaml:"startup_timeout"`
	// GracePeriod is the wait between SIGTERM and SIGKILL on stop (default
	// 30s).
	GracePeriod time.Duration `yaml:"grace_period"`
	// LogDir holds one log file per replica, <backend id>-<i>.log (default
	// $TMPDIR/modelgateway).
	LogDir  string        `yaml:"log_dir"`
	Restart RestartConfig `yaml:"restart"`
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.StartupTimeout == 0 {
		c.StartupTimeout = DefaultStartupTimeout
	}
	if c.GracePeriod == 0 {
		c.GracePeriod = DefaultGracePeriod
	}
	r := &c.Restart
	if r.BackoffBase == 0 {
		r.BackoffBase = time.Second
	}
	if r.BackoffMax == 0 {
		r.BackoffMax = time.Minute
	}
	if r.MaxCrashes == 0 {
		r.MaxCrashes = 5
	}
	if r.Window == 0 {
		r.Window = 10 * time.Minute
	}
}

var (
	placeholderRE = regexp.MustCompile(`\{[^{}\s]*\}`)
	envNameRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	placeholders  = map[string]bool{"{model}": true, "{port}": true, "{host}": true, "{name}": true}
)

// Validate checks c (after Defaults); errors name the field under launch.
func (c *Config) Validate() error {
	if strings.TrimSpace(c.Command) == "" {
		return errors.New("command: required")
	}
	if len(c.Command) > maxCommandBytes {
		return fmt.Errorf("command: longer than %d bytes", maxCommandBytes)
	}
	for _, p := range placeholderRE.FindAllString(c.Command, -1) {
		if !placeholders[p] {
			return fmt.Errorf("command: unknown placeholder %s (want {model}, {port}, {host} or {name})", p)
		}
	}
	if !strings.Contains(c.Command, "{port}") {
		return errors.New("command: must contain {port}: each replica listens on its own port")
	}
	if !c.Shell {
		if _, err := SplitWords(c.Command); err != nil {
			return fmt.Errorf("command: %w", err)
		}
	}
	if c.Replicas < 1 || c.Replicas > maxReplicas {
		return fmt.Errorf("replicas: must be in [1, %d]", maxReplicas)
	}
	lo, hi, err := ParsePorts(c.Ports)
	if err != nil {
		return fmt.Errorf("ports: %w", err)
	}
	if hi-lo+1 < c.Replicas {
		return fmt.Errorf("ports: %q holds %d ports, fewer than the %d replicas", c.Ports, hi-lo+1, c.Replicas)
	}
	if strings.ContainsAny(c.Host, "/ \t\n") {
		return fmt.Errorf("host: %q is not a host name or address", c.Host)
	}
	for k, v := range c.Env {
		if !envNameRE.MatchString(k) {
			return fmt.Errorf("env: %q is not a variable name", k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("env.%s: holds a NUL byte", k)
		}
	}
	if len(c.GPUs) != 0 && len(c.GPUs) != c.Replicas {
		return fmt.Errorf("gpus: %d GPU sets for %d replicas; give one per replica", len(c.GPUs), c.Replicas)
	}
	for i, g := range c.GPUs {
		if g == "" || strings.ContainsAny(g, " \t\n\x00") {
			return fmt.Errorf("gpus[%d]: %q is not a device list such as \"0,1\"", i, g)
		}
	}
	if c.ServerAPIKeyEnv != "" && !envNameRE.MatchString(c.ServerAPIKeyEnv) {
		return fmt.Errorf("server_api_key_env: %q is not a variable name", c.ServerAPIKeyEnv)
	}
	if c.StartupTimeout < 0 || c.GracePeriod < 0 {
		return errors.New("startup_timeout, grace_period: must be >= 0")
	}
	r := c.Restart
	if r.BackoffBase < 0 || r.BackoffMax < r.BackoffBase || r.MaxCrashes < 1 || r.Window <= 0 {
		return errors.New("restart: want 0 <= backoff_base <= backoff_max, max_crashes >= 1, window > 0")
	}
	return nil
}

// ParsePorts reads "LO-HI" or "PORT".
func ParsePorts(s string) (lo, hi int, err error) {
	if s == "" {
		return 0, 0, errors.New("required, e.g. 18001-18016")
	}
	a, b, found := strings.Cut(s, "-")
	if !found {
		b = a
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("%q is not a port or range LO-HI within 1-65535", s)
	}
	return lo, hi, nil
}

// SplitWords splits a command line into words as a POSIX shell would,
// without expanding anything: 'single' and "double" quotes group, a
// backslash escapes the next character (inside double quotes only before
// \ " $ and `).
func SplitWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // a word is open (even an empty quoted one)
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("ends in a lone backslash")
			}
			i++
			cur.WriteByte(s[i])
			in = true
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("no words")
	}
	return words, nil
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Argv builds the command of one replica: the template's words with the
// placeholders filled in (a value never splits a word nor is read by a
// shell), or /bin/sh -c with shell-quoted values when shell is set.
func Argv(template string, shell bool, vals map[string]string) ([]string, error) {
	if shell {
		line := placeholderRE.ReplaceAllStringFunc(template, func(p string) string { return shellQuote(vals[p]) })
		return []string{"/bin/sh", "-c", line}, nil
	}
	words, err := SplitWords(template)
	if err != nil {
		return nil, err
	}
	for i, w := range words {
		words[i] = placeholderRE.ReplaceAllStringFunc(w, func(p string) string { return vals[p] })
	}
	return words, nil
}
