// Package envflag lets environment variables set flags that were not given on
// the command line, so containers can be configured without a shell:
// --grpc-addr is overridden by ROLLOUTMESH_GRPC_ADDR.
package envflag

import (
	"flag"
	"fmt"
	"strings"
)

// Name returns the environment variable that overrides flag name.
func Name(prefix, flagName string) string {
	return prefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// Apply sets every flag of fs that was not set explicitly from the variable
// Name(prefix, flag) when lookup finds it. Command-line flags win over the
// environment. It must run after fs.Parse.
func Apply(fs *flag.FlagSet, prefix string, lookup func(string) (string, bool)) error {
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || explicit[f.Name] {
			return
		}
		env := Name(prefix, f.Name)
		v, ok := lookup(env)
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("environment %s: %w", env, serr)
		}
	})
	return err
}
