module github.com/rolloutmesh/rolloutmesh/cli

go 1.26.0

require (
	github.com/rolloutmesh/rolloutmesh/proto v0.0.0
	github.com/rolloutmesh/rolloutmesh/serverkit v0.0.0
	github.com/rolloutmesh/rolloutmesh/services/coordinator v0.0.0
	github.com/rolloutmesh/rolloutmesh/services/modelgateway v0.0.0
	github.com/rolloutmesh/rolloutmesh/services/runner v0.0.0
	github.com/rolloutmesh/rolloutmesh/services/storage v0.0.0
	github.com/rolloutmesh/rolloutmesh/services/vmmanager v0.0.0
)

replace (
	github.com/rolloutmesh/rolloutmesh/proto => ../proto
	github.com/rolloutmesh/rolloutmesh/serverkit => ../serverkit
	github.com/rolloutmesh/rolloutmesh/services/coordinator => ../services/coordinator
	github.com/rolloutmesh/rolloutmesh/services/modelgateway => ../services/modelgateway
	github.com/rolloutmesh/rolloutmesh/services/runner => ../services/runner
	github.com/rolloutmesh/rolloutmesh/services/storage => ../services/storage
	github.com/rolloutmesh/rolloutmesh/services/vmmanager => ../services/vmmanager
)
