package postgres

import (
	"context"
	"errors"
	"net"
	"plaita/test/pgtest"
	"strings"
	"sync"
	"testing"
	"time"
)

// newDatabase is a database of the test's own on the test server, dropped after it.
func newDatabase(t testing.TB) string { return pgtest.Database(t) }

// withDatabase is the test server's URL naming database name.
func withDatabase(t testing.TB, name string) string { return pgtest.WithDatabase(t, name) }

// On a real server, every connection carries the lock and statement budgets.
func TestOpenSetsTheBudgets(t *testing.T) {
	t.Parallel()
	db, err := connect(context.Background(), newDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var lock, stmt, app string
	if err := db.pool.QueryRow(context.Background(), "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), current_setting('application_name')").
		Scan(&lock, &stmt, &app); err != nil {
		t.Fatal(err)
	}
	if lock != "5s" || stmt != "30s" || app != "plaita-console" {
		t.Fatalf("lock_timeout %q, statement_timeout %q, application_name %q", lock, stmt, app)
	}
}

// A black-holed address (a listener that accepts and never answers) fails Open by name within
// the connect budget, the password masked.
func TestOpenBlackHoledFailsByName(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // accepted, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	start := time.Now()
	_, err = Open(context.Background(), "postgres://plaita:hunter2secret@"+ln.Addr().String()+"/console?sslmode=disable")
	took := time.Since(start)
	if !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), "hunter2secret") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("open: %v", err)
	}
	if took > 6*time.Second {
		t.Fatalf("it took %s", took)
	}
}

// A server that refuses (no such database) fails by name; a URL that is none too.
func TestOpenRefusedAndBadURL(t *testing.T) {
	t.Parallel()
	missing := withDatabase(t, "no_such_database_here")
	if _, err := Open(context.Background(), missing); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "3D000") {
		t.Fatalf("no such database: %v", err)
	}
	if _, err := Open(context.Background(), "postgres://u:pw@[::1"); !errors.Is(err, ErrBadURL) || strings.Contains(err.Error(), ":pw@") {
		t.Fatalf("a bad URL: %v", err)
	}
}
