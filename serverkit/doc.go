// Package serverkit is the shared server plumbing of the rolloutmesh
// services. It holds no code itself; its subpackages are narrow:
//
//   - daemon: flags, signals and the serve/drain lifecycle of one service
//   - grpcserver: a gRPC server with the mesh's interceptor chain, health and
//     reflection
//   - adminhttp: the /metrics and /healthz HTTP handler
//   - boundedread: size-capped reads of outside data, regular files only
//   - envflag: ROLLOUTMESH_* environment overrides for flags
//   - healthprobe: the gRPC health probe behind each binary's healthcheck
//   - secretflag: --<secret>-file twins of token flags, so secrets stay out of argv
//   - tlscreds: server and client TLS credentials from PEM files
//   - proctest: the test process's descendants from /proc, for argv checks,
//     and ports for the processes a test starts
//   - zaplog: zap loggers from flags
//   - benchreport: the goal lines the benchmark commands print for make bench
package serverkit
