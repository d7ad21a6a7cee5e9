// Package zaplog builds the zap loggers the services use, from two settings
// that every binary exposes as flags: level and format.
package zaplog

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config selects the log level and encoding.
type Config struct {
	// Level is debug, info, warn or error.
	Level string
	// Format is "json" (for machines and containers) or "console" (for people).
	Format string
}

// New builds a logger writing to standard error.
func New(cfg Config) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(orDefault(cfg.Level, "info"))
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", cfg.Level, err)
	}
	var zc zap.Config
	switch orDefault(cfg.Format, "json") {
	case "json":
		zc = zap.NewProductionConfig()
	case "console":
		zc = zap.NewDevelopmentConfig()
		zc.Development = false
	default:
		return nil, fmt.Errorf("log format %q: want json or console", cfg.Format)
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	// Sampling would silently drop repeated error lines, which are exactly the
	// ones an operator needs when a backend flaps.
	zc.Sampling = nil
	zc.EncoderConfig.TimeKey = "ts"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return zc.Build()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
