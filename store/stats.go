package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// CommandCalls is the number of commands the server (every node of a cluster) has executed
// since its start or its last CONFIG RESETSTAT, from INFO commandstats: the sum of calls over
// every command, those run inside Lua scripts included. Benchmarks take the difference of two
// readings (each reading adds one INFO per node).
func CommandCalls(ctx context.Context, c rueidis.Client) (int64, error) {
	var total int64
	for addr, node := range c.Nodes() {
		info, err := node.Do(ctx, node.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats on %s: %w", addr, err)
		}
		n, err := sumCalls(info)
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats on %s: %w", addr, err)
		}
		total += n
	}
	return total, nil
}

// sumCalls adds the calls= fields of INFO commandstats lines ("cmdstat_get:calls=3,usec=…").
func sumCalls(info string) (int64, error) {
	var total int64
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad line %q: %w", line, err)
		}
		total += n
	}
	return total, nil
}
