// Package daemon runs one rolloutmesh service as a process: flags with
// ROLLOUTMESH_* environment overrides, logger and metrics registry, the gRPC
// server and the admin HTTP listener, the `healthcheck` subcommand, and the
// drain on SIGTERM/SIGINT (health NOT_SERVING, then the service's own drain,
// then GracefulStop bounded by a timer, then Close, then exit 0).
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/rolloutmesh/rolloutmesh/serverkit/envflag"
	"github.com/rolloutmesh/rolloutmesh/serverkit/healthprobe"
	"github.com/rolloutmesh/rolloutmesh/serverkit/secretflag"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds"
	"github.com/rolloutmesh/rolloutmesh/serverkit/zaplog"
)

// EnvPrefix prefixes the environment variables that override flags.
const EnvPrefix = "ROLLOUTMESH_"

// DefaultDrainTimeout bounds the drain on SIGTERM.
const DefaultDrainTimeout = 15 * time.Second

// Service is a gRPC service run by the daemon.
type Service interface {
	// Register adds the service's handlers to the server.
	Register(s *grpc.Server)
	// Close releases the service's resources. It is called once, after the
	// gRPC server has stopped.
	Close(ctx context.Context) error
}

// Drainer is implemented by services that have work to finish or hand back
// before the gRPC server stops (runner episodes, coordinator streams).
type Drainer interface {
	Drain(ctx context.Context) error
}

// Validator is implemented by services that check requests before their
// handlers run. A non-nil error reaches the client as InvalidArgument.
type Validator interface {
	ValidateRequest(fullMethod string, req any) error
}

// Env is what a service gets from the daemon.
type Env struct {
	// Logger is the process logger, named after the service.
	Logger *zap.Logger
	// Registry receives the service's metrics; /metrics serves it.
	Registry *prometheus.Registry
	// DataDir is where the service keeps its data (empty when the service
	// keeps none). It exists.
	DataDir string
	// GRPCAddr is the address the gRPC server listens on.
	GRPCAddr string
	// AuthToken is the bearer token the gRPC server requires (from
	// --auth-token, its file or the environment); "" when none. A service
	// with another front (the gateway's OpenAI HTTP) requires it there too.
	AuthToken string
	// TLS is the server TLS config the gRPC server serves with (from
	// --tls-cert, --tls-key, --tls-client-ca); nil serves plaintext.
	TLS *tls.Config
}

// Command is a subcommand of a service binary (e.g. `runner episode`).
type Command func(ctx context.Context, args []string) error

// Spec describes a service binary.
type Spec struct {
	// Name of the service, e.g. "storage".
	Name string
	// GRPCAddr and HTTPAddr are the default listen addresses.
	GRPCAddr, HTTPAddr string
	// DataDir adds --data-dir (default data/<name>).
	DataDir bool
	// Flags registers the service's own flags.
	Flags func(fs *flag.FlagSet)
	// Start builds the service once flags are parsed.
	Start func(ctx context.Context, env Env) (Service, error)
	// Commands are extra subcommands; `healthcheck` is always there.
	Commands map[string]Command
}

// Main runs the binary described by spec and exits: 0 after a clean drain,
// 1 on error, 2 on bad flags.
func Main(spec Spec) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := Run(ctx, spec, os.Args[1:])
	stop()
	switch {
	case err == nil:
		os.Exit(0)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, new(usageError)):
		fmt.Fprintf(os.Stderr, "%s: %v\n", spec.Name, err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", spec.Name, err)
		os.Exit(1)
	}
}

type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// Run runs the binary with args until ctx is cancelled, then drains.
func Run(ctx context.Context, spec Spec, args []string) error {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if args[0] == "healthcheck" {
			return healthcheck(ctx, spec, args[1:])
		}
		if cmd, ok := spec.Commands[args[0]]; ok {
			return cmd(ctx, args[1:])
		}
		return usageError{fmt.Errorf("unknown subcommand %q", args[0])}
	}

	fs := flag.NewFlagSet(spec.Name, flag.ContinueOnError)
	grpcAddr := fs.String("grpc-addr", spec.GRPCAddr, "gRPC listen address")
	httpAddr := fs.String("http-addr", spec.HTTPAddr, "HTTP listen address for /metrics and /healthz (empty disables)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	logFormat := fs.String("log-format", "json", "log format: json or console")
	drain := fs.Duration("drain-timeout", DefaultDrainTimeout, "how long SIGTERM waits for in-flight work before stopping hard")
	authToken := fs.String("auth-token", "", "require this bearer token on every gRPC call (health and reflection excepted); prefer --auth-token-file or $ROLLOUTMESH_AUTH_TOKEN, which ps does not show")
	tlsCert := fs.String("tls-cert", "", "PEM certificate (chain) to serve gRPC over TLS; needs --tls-key")
	tlsKey := fs.String("tls-key", "", "PEM private key of --tls-cert")
	tlsClientCA := fs.String("tls-client-ca", "", "PEM CA bundle; when set, every gRPC client must present a certificate it signed (mutual TLS)")
	var dataDir *string
	if spec.DataDir {
		dataDir = fs.String("data-dir", filepath.Join("data", spec.Name), "directory for the service's data")
	}
	if spec.Flags != nil {
		spec.Flags(fs)
	}
	// Registered after the service's flags so that theirs (--peer-token)
	// get a --<name>-file twin too.
	secretFiles := secretflag.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %q", fs.Args())}
	}
	if err := envflag.Apply(fs, EnvPrefix, os.LookupEnv); err != nil {
		return usageError{err}
	}
	if err := secretFiles.Resolve(); err != nil {
		return usageError{err}
	}
	var creds credentials.TransportCredentials
	var tlsCfg *tls.Config
	if *tlsCert != "" || *tlsKey != "" || *tlsClientCA != "" {
		cfg, err := tlscreds.Server(*tlsCert, *tlsKey, *tlsClientCA)
		if err != nil {
			return usageError{err}
		}
		tlsCfg, creds = cfg, credentials.NewTLS(cfg)
	}

	logger, err := zaplog.New(zaplog.Config{Level: *logLevel, Format: *logFormat})
	if err != nil {
		return usageError{err}
	}
	logger = logger.Named(spec.Name)
	defer func() { _ = logger.Sync() }()

	env := Env{Logger: logger, Registry: NewRegistry(), AuthToken: *authToken, TLS: tlsCfg}
	if dataDir != nil {
		if err := os.MkdirAll(*dataDir, 0o750); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		env.DataDir = *dataDir
	}

	var lc net.ListenConfig
	gl, err := lc.Listen(ctx, "tcp", *grpcAddr)
	if err != nil {
		return fmt.Errorf("listen grpc: %w", err)
	}
	env.GRPCAddr = gl.Addr().String()
	var hl net.Listener
	if *httpAddr != "" {
		if hl, err = lc.Listen(ctx, "tcp", *httpAddr); err != nil {
			gl.Close()
			return fmt.Errorf("listen http: %w", err)
		}
	}

	svc, err := spec.Start(ctx, env)
	if err != nil {
		gl.Close()
		if hl != nil {
			hl.Close()
		}
		return fmt.Errorf("start %s: %w", spec.Name, err)
	}
	logger.Info("serving", zap.String("grpc_addr", env.GRPCAddr), zap.String("http_addr", *httpAddr), zap.String("data_dir", env.DataDir),
		zap.Bool("tls", creds != nil), zap.Bool("mutual_tls", *tlsClientCA != ""), zap.Bool("auth_token", *authToken != ""))
	return Serve(ctx, ServeConfig{
		GRPCListener: gl,
		HTTPListener: hl,
		Logger:       logger,
		Registry:     env.Registry,
		AuthToken:    *authToken,
		Creds:        creds,
		DrainTimeout: *drain,
	}, svc)
}

// NewRegistry returns a metrics registry with the Go runtime and process
// collectors, for one service.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func healthcheck(ctx context.Context, spec Spec, args []string) error {
	fs := flag.NewFlagSet(spec.Name+" healthcheck", flag.ContinueOnError)
	def := spec.GRPCAddr
	if v, ok := os.LookupEnv(envflag.Name(EnvPrefix, "grpc-addr")); ok {
		def = v
	}
	addr := fs.String("addr", localAddr(def), "gRPC address to probe")
	timeout := fs.Duration("timeout", 3*time.Second, "probe timeout")
	// The probe runs where the service runs (a container's health check),
	// with the same environment: by default it trusts the service's own
	// certificate and, when the service requires client certificates,
	// presents that same certificate, so a TLS service needs no extra
	// configuration for its health check. The service certificate then
	// needs the clientAuth usage too (scripts/make-test-ca.sh gives it).
	env := func(name string) string { return os.Getenv(envflag.Name(EnvPrefix, name)) }
	var tc tlscreds.Client
	tc.RegisterFlags(fs, "")
	tc.CA = env("tls-ca")
	if tc.CA == "" {
		tc.CA = env("tls-cert")
	}
	if env("tls-client-ca") != "" {
		tc.Cert, tc.Key = env("tls-cert"), env("tls-key")
	}
	for _, f := range []string{"tls-ca", "tls-cert", "tls-key"} {
		fs.Lookup(f).DefValue = fs.Lookup(f).Value.String()
	}
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	creds, err := tc.Credentials()
	if err != nil {
		return usageError{err}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	return healthprobe.Check(ctx, *addr, "", grpc.WithTransportCredentials(creds))
}

// localAddr turns a listen address such as ":50051" or "0.0.0.0:50051" into
// one a local client can dial.
func localAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// FieldError is a validation error that names the offending request field.
type FieldError struct {
	// Field is the field path, e.g. "spec.group_size".
	Field string
	// Problem says what is wrong, e.g. "must be between 1 and 1024".
	Problem string
}

// InvalidField returns a *FieldError for field.
func InvalidField(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// FieldViolation lets the gRPC server attach a BadRequest detail.
func (e *FieldError) FieldViolation() (field, description string) { return e.Field, e.Problem }
