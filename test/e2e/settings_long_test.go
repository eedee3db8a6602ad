//go:build e2e && (chaos || soak)

package e2e

import (
	"os"
	"strconv"
	"testing"
)

// positiveSetting reads a positive integer setting of a long suite from the environment (def
// when unset).
func positiveSetting(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
