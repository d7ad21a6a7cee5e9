// Command fakellm runs a stand-in for a GPU model server: it speaks OpenAI's
// chat API the way vLLM does and answers from a script. It is not a model.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8001", "listen address HOST:PORT")
	var cfg fakellm.Config
	flag.StringVar(&cfg.Model, "model", "fake-model", "served model name")
	flag.DurationVar(&cfg.TTFT, "ttft", 0, "time to first token on a prefix-cache miss")
	flag.DurationVar(&cfg.CachedTTFT, "cached-ttft", 0, "time to first token on a prefix-cache hit")
	flag.DurationVar(&cfg.PerToken, "per-token", 0, "time between tokens")
	flag.IntVar(&cfg.CacheKeys, "cache-keys", 256, "routing keys the prefix cache holds")
	flag.DurationVar(&cfg.SlowStart, "slow-start", 0, "answer 503 this long after start")
	flag.Float64Var(&cfg.Faults.ErrorRate, "error-rate", 0, "fraction of chat requests answered 500")
	flag.Float64Var(&cfg.Faults.HangRate, "hang-rate", 0, "fraction of chat requests that hang until the client goes away")
	flag.Float64Var(&cfg.Faults.DropRate, "drop-rate", 0, "fraction of chat requests whose connection is dropped")
	flag.BoolVar(&cfg.Faults.HealthDown, "health-down", false, "answer /health with 503")
	flag.BoolVar(&cfg.CheckWeights, "check-weights", false, "refuse a weights update whose path is not a directory holding config.json")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seed for fault injection")
	script := flag.String("script", "", "JSONL script: {\"match\": REGEXP, \"reply\": TEXT} or with \"tool_calls\"")
	flag.Parse()
	if err := run(*addr, *script, cfg); err != nil {
		log.Fatal(err)
	}
}

func run(addr, script string, cfg fakellm.Config) error {
	if script != "" {
		rules, err := fakellm.LoadScript(script)
		if err != nil {
			return err
		}
		cfg.Script = rules
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	in, err := fakellm.Start(ctx, addr, cfg)
	if err != nil {
		return err
	}
	log.Printf("fakellm (a stand-in, not a model) serving %s on %s", cfg.Model, in.URL)
	<-ctx.Done()
	// Give in-flight answers a moment; fakellm holds no state worth more.
	time.Sleep(100 * time.Millisecond)
	return in.Close()
}
