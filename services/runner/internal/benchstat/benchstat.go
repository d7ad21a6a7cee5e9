// Package benchstat holds what the runner's benchmark commands share to
// report figures: nearest-rank percentiles and the machine's load.
package benchstat

import (
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// Percentile is the nearest-rank percentile p (0-100] of ds; 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// LoadAverage is the 1-minute load average, for the reader to judge how
// busy the machine was; "?" where /proc has none.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
