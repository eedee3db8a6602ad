package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// target is the Redis both peers run on: plaita in one db, asynq in another.
type target struct {
	plaitaURL string         // handed to `plaita bench e2e --redis`
	asynqOpts *redis.Options // asynq's db; also the control connection for INFO and clean-up
	asynq     *redis.Client
	plaita    *redis.Client
	private   bool      // started here, so its dbs may be flushed
	proc      *exec.Cmd // the private redis-server, if any
	version   string
}

// openTarget connects to --redis, or starts a private redis-server when none is given.
func openTarget(ctx context.Context, o options, dir string) (*target, error) {
	t := &target{plaitaURL: o.redisURL}
	if t.plaitaURL == "" {
		proc, addr, err := startRedis(dir)
		if err != nil {
			return nil, err
		}
		t.proc, t.private, t.plaitaURL = proc, true, "redis://"+addr+"/0"
	}
	popts, err := redis.ParseURL(t.plaitaURL)
	if err != nil {
		t.close()
		return nil, fmt.Errorf("--redis: %w", err)
	}
	if popts.DB == o.asynqDB {
		t.close()
		return nil, fmt.Errorf("asynq db %d is plaita's db too: pick another --asynq-db", o.asynqDB)
	}
	aopts := *popts
	aopts.DB = o.asynqDB
	t.asynqOpts, t.asynq, t.plaita = &aopts, redis.NewClient(&aopts), redis.NewClient(popts)
	if err := t.check(ctx); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// check reads the server version and, on a server given by --redis, refuses non-empty dbs:
// this program never flushes a server it did not start.
func (t *target) check(ctx context.Context) error {
	info, err := t.asynq.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	t.version = infoField(info, "redis_version")
	if t.private {
		return nil
	}
	for _, c := range []*redis.Client{t.plaita, t.asynq} {
		n, err := c.DBSize(ctx).Result()
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("db %d of --redis has %d keys: give an empty db (see --asynq-db)", c.Options().DB, n)
		}
	}
	return nil
}

// resetAsynq gives asynq an empty db, as asynq's own benchmark does before each run. On a
// server given by --redis only asynq's keys go: the db was empty when the program started.
func (t *target) resetAsynq(ctx context.Context) error {
	if t.private {
		return t.asynq.FlushDB(ctx).Err()
	}
	iter := t.asynq.Scan(ctx, 0, "asynq:*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := t.asynq.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}

// resetPlaita empties plaita's db on the private server; elsewhere plaita keeps its own keys.
func (t *target) resetPlaita(ctx context.Context) error {
	if !t.private {
		return nil
	}
	return t.plaita.FlushDB(ctx).Err()
}

// commandCalls is the server's count of commands run so far (see sumCalls).
func (t *target) commandCalls(ctx context.Context) (int64, error) {
	info, err := t.asynq.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	return sumCalls(info)
}

// redisCPU is the CPU time the server has used (INFO cpu: used_cpu_user + used_cpu_sys).
func (t *target) redisCPU(ctx context.Context) (time.Duration, error) {
	info, err := t.asynq.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var secs float64
	for line := range strings.Lines(info) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu line %q: %w", strings.TrimSpace(line), err)
			}
			secs += f
		}
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// sumCalls adds up the calls of every command in INFO commandstats. Redis counts the commands
// a Lua script runs as well as the EVALSHA itself, so scripts are not free in this count. INFO
// is left out: it is this program's own snapshot, not the peer's work.
func sumCalls(info string) (int64, error) {
	var sum int64
	for line := range strings.Lines(info) {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("commandstats line %q: %w", strings.TrimSpace(line), err)
		}
		sum += n
	}
	return sum, nil
}

func (t *target) close() {
	for _, c := range []*redis.Client{t.asynq, t.plaita} {
		if c != nil {
			c.Close()
		}
	}
	if t.proc != nil {
		stopRedis(t.proc)
	}
}

// startRedis runs redis-server from PATH on a free loopback port, without persistence so that
// disk writes do not colour the numbers.
func startRedis(dir string) (*exec.Cmd, string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", fmt.Errorf("no redis-server on PATH (or give --redis): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", logFile)
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if c.Ping(context.Background()).Err() == nil {
			logf("private redis-server on %s", addr)
			return cmd, addr, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopRedis(cmd)
	log, _ := os.ReadFile(logFile)
	return nil, "", fmt.Errorf("redis-server on %s did not answer:\n%s", addr, log)
}

// stopRedis asks redis-server to stop (SIGTERM) and kills it if it has not within 5 s.
func stopRedis(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("no TCP port")
	}
	return addr.Port, nil
}

func infoField(info, key string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}
