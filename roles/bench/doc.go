// Package bench is `plaita bench`: the engine measured end to end on a real Redis, with a worker
// (and for the suspend scenario a filter) in this process — executions, steps or round trips
// per second, latencies, Redis calls and CPU per execution. The command's flags and table are
// in cli/ (bench.go); the figures are what the README's Performance section quotes.
package bench
