package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// imageCounts is the gateway's image cache over a run, from its metrics.
type imageCounts struct {
	hits, misses, puts float64
	ok                 bool
}

// readImageCounts reads the image cache's counters from the gateway's
// /metrics; ok is false when they could not be read.
func readImageCounts(ctx context.Context, addr string) imageCounts {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return imageCounts{}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return imageCounts{}
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return imageCounts{}
	}
	value := func(name string) (float64, bool) {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter() == nil {
			return 0, false
		}
		return f.GetMetric()[0].GetCounter().GetValue(), true
	}
	var c imageCounts
	var okH, okM, okP bool
	c.hits, okH = value("modelgateway_image_cache_hits_total")
	c.misses, okM = value("modelgateway_image_cache_misses_total")
	c.puts, okP = value("modelgateway_image_cache_puts_total")
	c.ok = okH && okM && okP
	return c
}

// String is the line the run prints.
func (c imageCounts) String() string {
	if !c.ok {
		return "gateway image cache: metrics not read"
	}
	refs := c.hits + c.misses
	share := 0.0
	if refs > 0 {
		share = 100 * c.misses / refs
	}
	return fmt.Sprintf("gateway image cache: %.0f references resolved, %.0f missed (%.1f %%; a runner sends each such request again with the images' bytes), %.0f images stored",
		c.hits, c.misses, share, c.puts)
}
