//go:build !unix

package caddymodule

import "time"

// cpuTime is not measured here: the benchmarks report 0 CPU per request.
func cpuTime() time.Duration { return 0 }
