package postgres

import (
	"context"
	"database/sql/driver"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// The console's queries are written once with ? placeholders (store/sqlite/doc.go: Portable
// SQL); PostgreSQL numbers its own ($1, $2 …). The pool's connections rebind every query they
// are given, so the queries stay one text on both databases.

// rebinder wraps the pool's connector: its connections rebind their queries, and acquiring one
// is bounded by AcquireTimeout.
type rebinder struct {
	driver.Connector
	cache *sync.Map // query → rebound query
}

func (r rebinder) Connect(ctx context.Context) (driver.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, AcquireTimeout)
	defer cancel()
	c, err := r.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rebindConn{Conn: c.(*stdlib.Conn), cache: r.cache}, nil
}

// rebindConn is a pool connection whose queries take ? placeholders; every other method is
// stdlib's.
type rebindConn struct {
	*stdlib.Conn
	cache *sync.Map
}

func (c *rebindConn) q(query string) string {
	if v, ok := c.cache.Load(query); ok {
		return v.(string)
	}
	out := rebind(query)
	c.cache.Store(query, out)
	return out
}

func (c *rebindConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.Prepare(c.q(query))
}

func (c *rebindConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, c.q(query))
}

// Every statement also has a deadline of the client's own, callTimeout: statement_timeout is
// the server's, and a server that stopped answering on a connection that stays open (a
// half-open connection, a partition) would never send its end. The deadline of a query lasts
// until its rows are closed.

func (c *rebindConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.Conn.ExecContext(ctx, c.q(query), args)
}

func (c *rebindConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	rows, err := c.Conn.QueryContext(ctx, c.q(query), args)
	if err != nil {
		cancel()
		return nil, err
	}
	return &boundRows{Rows: rows, cancel: cancel}, nil
}

// callTimeout bounds one statement on the client: the server's statement_timeout and a margin.
const callTimeout = StatementTimeout + 5*time.Second

// boundRows are a query's rows; closing them ends the query's deadline.
type boundRows struct {
	driver.Rows
	cancel context.CancelFunc
}

func (r *boundRows) Close() error {
	err := r.Rows.Close()
	r.cancel()
	return err
}

// rebind numbers the ? placeholders of query $1, $2 … in order, leaving alone what is inside
// string literals, quoted identifiers and comments.
func rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case ch == '\'' || ch == '"': // a literal or an identifier; a doubled quote stays inside
			j := i + 1
			for j < len(query) {
				if query[j] == ch {
					if j+1 < len(query) && query[j+1] == ch {
						j += 2
						continue
					}
					break
				}
				j++
			}
			end := min(j+1, len(query))
			b.WriteString(query[i:end])
			i = end - 1
		case ch == '-' && i+1 < len(query) && query[i+1] == '-': // a comment to the end of the line
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i
			}
			b.WriteString(query[i : i+j])
			i += j - 1
		case ch == '/' && i+1 < len(query) && query[i+1] == '*': // a block comment
			j := strings.Index(query[i+2:], "*/")
			end := len(query)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(query[i:end])
			i = end - 1
		case ch == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}
