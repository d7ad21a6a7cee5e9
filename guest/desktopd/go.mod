module github.com/rolloutmesh/rolloutmesh/guest/desktopd

go 1.26.0

require (
	github.com/godbus/dbus/v5 v5.2.4
	github.com/jezek/xgb v1.1.1
	github.com/klauspost/compress v1.20.3
	go.uber.org/zap v1.28.0
)

require (
	go.uber.org/multierr v1.10.0 // indirect
	golang.org/x/sys v0.27.0 // indirect
)
