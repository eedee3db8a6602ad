//go:build !e2e

package e2e
