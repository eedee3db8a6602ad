// Package pgtest gives a test a PostgreSQL database of its own on the test server
// (PLAITA_TEST_POSTGRES_URL; default the local server with trust auth, as on the CI machines),
// dropped when the test ends: tests never share tables.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the test server when PLAITA_TEST_POSTGRES_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// URL is the test server's URL (a database an administrator may create databases from).
func URL() string {
	if u := os.Getenv("PLAITA_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Database makes a database of the test's own and returns its URL; it is dropped (its
// connections ended) when the test ends.
func Database(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, URL())
	if err != nil {
		t.Fatalf("the test PostgreSQL (PLAITA_TEST_POSTGRES_URL=%s): %v", URL(), err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, URL())
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	return WithDatabase(t, name)
}

// WithDatabase is the test server's URL naming database name.
func WithDatabase(t testing.TB, name string) string {
	t.Helper()
	u, err := url.Parse(URL())
	if err != nil {
		t.Fatalf("PLAITA_TEST_POSTGRES_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
