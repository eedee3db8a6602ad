package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

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

// ClusterNodes is one node's CLUSTER NODES reply (its view of the cluster's topology).
func ClusterNodes(ctx context.Context, node rueidis.Client) (string, error) {
	return node.Do(ctx, node.B().ClusterNodes().Build()).ToString()
}

// UsedCPU is the CPU time a server has used since its start (INFO cpu: used_cpu_user +
// used_cpu_sys). Only a server a benchmark has to itself makes it the workload's cost.
func UsedCPU(ctx context.Context, node rueidis.Client) (time.Duration, error) {
	info, err := node.Do(ctx, node.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	var secs float64
	for line := range strings.SplitSeq(info, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu: line %q: %w", line, err)
			}
			secs += f
		}
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// KeyCount is how many keys the selected database holds, over every primary of a cluster
// (DBSIZE): a benchmark refuses a database that holds someone's data.
func KeyCount(ctx context.Context, c rueidis.Client) (int64, error) {
	var total int64
	for addr, node := range c.Nodes() {
		n, err := node.Do(ctx, node.B().Dbsize().Build()).AsInt64()
		if err != nil {
			return 0, fmt.Errorf("DBSIZE on %s: %w", addr, err)
		}
		total += n
	}
	return total, nil
}
