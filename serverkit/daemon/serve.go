package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/rolloutmesh/rolloutmesh/serverkit/adminhttp"
	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
)

// ServeConfig says where and how Serve runs a service.
type ServeConfig struct {
	// GRPCListener is required; Serve closes it.
	GRPCListener net.Listener
	// HTTPListener serves /metrics and /healthz when not nil; Serve closes it.
	HTTPListener net.Listener
	// Logger is required.
	Logger *zap.Logger
	// Registry is required; the gRPC metrics are added to it.
	Registry *prometheus.Registry
	// AuthToken optionally requires a bearer token on every call.
	AuthToken string
	// Creds, when set, serve gRPC over TLS (tlscreds.Server); nil serves
	// plaintext.
	Creds credentials.TransportCredentials
	// DrainTimeout bounds the drain; default DefaultDrainTimeout.
	DrainTimeout time.Duration
	// MaxMsgBytes bounds gRPC messages; default grpcserver.DefaultMaxMsgBytes.
	MaxMsgBytes int
	// ExtraServices are registered on the same gRPC server (the all-in-one
	// binary uses this to serve several services on one port).
	ExtraServices []Service
}

// HTTPService is implemented by services that serve more than /metrics and
// /healthz on their HTTP address (storage's trajectory viewer under /ui/).
// The handler gets every other path and checks the bearer token itself.
type HTTPService interface {
	HTTPHandler() http.Handler
}

// GRPCServer is implemented by services that may serve their gRPC
// listener on a transport of their own (the model gateway's event loops).
// ServeGRPC is called once srv has every service registered. When it
// returns a channel, the service owns ln from then on, serves the calls
// it does not run itself with srv (grpc.Server.ServeHTTP), and stops
// taking calls in its Drain; the channel delivers an error if that
// transport stops by itself, which ends Serve as a failed listener does.
// When it returns nil, srv serves ln.
type GRPCServer interface {
	ServeGRPC(ln net.Listener, srv *grpcserver.Server) (stopped <-chan error, err error)
}

// Serve runs svc until ctx is cancelled or a listener fails, then drains:
//  1. health goes NOT_SERVING, so load balancers and probes stop sending work;
//  2. the service drains its own work (Drainer), within the drain timeout;
//  3. GracefulStop waits for in-flight calls, and a timer stops the server
//     hard when the drain timeout runs out (long streams would otherwise hold
//     it forever);
//  4. the admin HTTP server shuts down and the service closes.
//
// It returns nil after a drain started by ctx.
func Serve(ctx context.Context, cfg ServeConfig, svc Service) error {
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	services := append([]Service{svc}, cfg.ExtraServices...)
	validators := map[Service]Validator{}
	for _, s := range services {
		if v, ok := s.(Validator); ok {
			validators[s] = v
		}
	}
	srv, err := grpcserver.New(grpcserver.Options{
		Logger:      cfg.Logger,
		Registry:    cfg.Registry,
		AuthToken:   cfg.AuthToken,
		Creds:       cfg.Creds,
		MaxMsgBytes: cfg.MaxMsgBytes,
		Validate: func(method string, req any) error {
			for _, v := range validators {
				if err := v.ValidateRequest(method, req); err != nil {
					return err
				}
			}
			return nil
		},
	})
	if err != nil {
		closeAll(cfg, services)
		return err
	}
	for _, s := range services {
		s.Register(srv.GRPC)
	}
	srv.Ready()

	var own <-chan error // the service's own gRPC transport's end
	if gs, ok := svc.(GRPCServer); ok {
		if own, err = gs.ServeGRPC(cfg.GRPCListener, srv); err != nil {
			closeAll(cfg, services)
			return fmt.Errorf("serve grpc: %w", err)
		}
	}
	errc := make(chan error, 2)
	if own == nil {
		go func() {
			if err := srv.GRPC.Serve(cfg.GRPCListener); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("serve grpc: %w", err)
			}
		}()
	} else {
		go func() {
			if err := <-own; err != nil {
				errc <- fmt.Errorf("serve grpc: %w", err)
			}
		}()
	}
	var hs *http.Server
	if cfg.HTTPListener != nil {
		var handler http.Handler = adminhttp.Handler(cfg.Registry, func() error {
			resp, err := srv.Health.Check(context.Background(), &healthpb.HealthCheckRequest{})
			if err != nil {
				return err
			}
			if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return errors.New(resp.GetStatus().String())
			}
			return nil
		})
		if h, ok := svc.(HTTPService); ok {
			mux := http.NewServeMux()
			mux.Handle("/metrics", handler)
			mux.Handle("/healthz", handler)
			mux.Handle("/", h.HTTPHandler())
			handler = mux
		}
		hs = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hs.Serve(cfg.HTTPListener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve http: %w", err)
			}
		}()
	}

	var serveErr error
	select {
	case <-ctx.Done():
		cfg.Logger.Info("draining", zap.Duration("drain_timeout", cfg.DrainTimeout))
	case serveErr = <-errc:
		cfg.Logger.Error("listener failed, stopping", zap.Error(serveErr))
	}

	deadline := time.Now().Add(cfg.DrainTimeout)
	drainCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	srv.Health.Shutdown()
	for _, s := range services {
		if d, ok := s.(Drainer); ok {
			if err := d.Drain(drainCtx); err != nil {
				cfg.Logger.Warn("service drain incomplete", zap.Error(err))
			}
		}
	}
	hard := time.AfterFunc(time.Until(deadline), srv.GRPC.Stop)
	srv.GRPC.GracefulStop()
	hard.Stop()
	if hs != nil {
		shutCtx, shutCancel := context.WithTimeout(context.Background(), time.Second)
		_ = hs.Shutdown(shutCtx)
		shutCancel()
	}
	// Close gets its own short budget: a drain that used the whole timeout
	// must still let databases flush.
	closeCtx, closeCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer closeCancel()
	for _, s := range services {
		if err := s.Close(closeCtx); err != nil {
			cfg.Logger.Warn("service close failed", zap.Error(err))
			if serveErr == nil {
				serveErr = fmt.Errorf("close: %w", err)
			}
		}
	}
	cfg.Logger.Info("stopped")
	return serveErr
}

func closeAll(cfg ServeConfig, services []Service) {
	cfg.GRPCListener.Close()
	if cfg.HTTPListener != nil {
		cfg.HTTPListener.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range services {
		_ = s.Close(ctx)
	}
}
