// Command modelgateway runs the rolloutmesh model gateway: gRPC on :50054,
// OpenAI-compatible HTTP on :8000, metrics on :9104.
package main

import (
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
)

func main() {
	modelgateway.SetGCDefaults()
	daemon.Main(modelgateway.Spec())
}
