package code

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"

	"plaita/engine/nodes/sandbox"
)

// The restricted backend runs js in goja, an ECMAScript interpreter written in Go, inside the
// worker. The runtime has the standard ECMAScript built-ins and a console object (log/info/debug
// write the captured stdout, warn/error the captured stderr) and nothing else: no require, no
// process, no timers, no I/O. It is interrupted on the timeout and on cancellation.
//
// NOT bounded: memory. The code shares the worker's heap, so an allocation bomb can take the
// worker down; a long-running built-in (a huge String.prototype.repeat, a pathological regular
// expression) is not interruptible until it returns. Use docker for untrusted code.

const (
	restrictedMaxCallStack = 10000
	// interruptGrace is how long Run waits for the interpreter to stop after an interrupt before
	// it gives up on it (it is then stuck in a built-in and is abandoned).
	interruptGrace = 2 * time.Second
)

type restrictedOut struct {
	value any
	err   error
}

func (r *runner) runRestricted(ctx context.Context, input any) (any, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("code node (js, restricted): input cannot be encoded as JSON: %w", err)
	}
	vm := goja.New()
	vm.SetMaxCallStackSize(restrictedMaxCallStack)
	var (
		mu     sync.Mutex
		reason error // why the interpreter was interrupted
	)
	interrupt := func(why error) {
		mu.Lock()
		defer mu.Unlock()
		if reason == nil {
			reason = why
			vm.Interrupt(why)
		}
	}
	interrupted := func() error {
		mu.Lock()
		defer mu.Unlock()
		return reason
	}
	stdout := &consoleBuf{max: sandbox.DefaultMaxStdout, overflow: func() {
		interrupt(fmt.Errorf("wrote more than %d bytes to the console", sandbox.DefaultMaxStdout))
	}}
	stderr := &consoleBuf{max: sandbox.DefaultStderrTail, tail: true}

	done := make(chan restrictedOut, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- restrictedOut{err: fmt.Errorf("interpreter panic: %v", p)}
			}
		}()
		v, err := runGoja(vm, r.code, string(in), stdout, stderr)
		done <- restrictedOut{v, err}
	}()

	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	var out restrictedOut
	got := false
	select {
	case out = <-done:
		got = true
	case <-timer.C:
		interrupt(fmt.Errorf("timed out after %s (PLAITA_SANDBOX_TIMEOUT)", r.timeout))
	case <-ctx.Done():
		interrupt(fmt.Errorf("cancelled: %w", ctx.Err()))
	}
	if !got {
		select {
		case out = <-done:
		case <-time.After(interruptGrace):
			r.t.log.Error().Str("event", "code_node.restricted_abandoned").
				Msg("restricted js did not stop after its interrupt (stuck in a built-in); the interpreter is abandoned")
			return nil, fmt.Errorf("code node (js, restricted): %v; the interpreter did not stop (a long built-in call) and was abandoned", interrupted())
		}
	}
	stopped := interrupted()
	var ie *goja.InterruptedError
	if errors.As(out.err, &ie) && stopped != nil {
		return nil, fmt.Errorf("code node (js, restricted): %v%s", stopped, stderr.suffix())
	}
	var so *goja.StackOverflowError
	if errors.As(out.err, &so) {
		return nil, fmt.Errorf("code node (js, restricted): maximum call stack size (%d) exceeded%s", restrictedMaxCallStack, stderr.suffix())
	}
	if out.err != nil {
		return nil, fmt.Errorf("code node (js, restricted): %s%s", sandbox.Truncate(out.err.Error(), sandbox.DefaultStderrTail), stderr.suffix())
	}
	if out.value != nil {
		return out.value.(resultValue).v, nil
	}
	v, err := parseResult([]byte(stdout.String()))
	if err != nil {
		return nil, fmt.Errorf("code node (js, restricted): %v%s", err, stderr.suffix())
	}
	return v, nil
}

// resultValue wraps a returned value (which may be JSON null) to tell it from "no value".
type resultValue struct{ v any }

// runGoja compiles the code as the body of an async function of INPUT, calls it and settles
// the promise. It returns (nil, nil) when the code returned undefined.
func runGoja(vm *goja.Runtime, code, input string, stdout, stderr *consoleBuf) (any, error) {
	console := vm.NewObject()
	logTo := func(b *consoleBuf) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value {
			parts := make([]string, len(c.Arguments))
			for i, a := range c.Arguments {
				parts[i] = a.String()
			}
			b.write(strings.Join(parts, " ") + "\n")
			return goja.Undefined()
		}
	}
	for _, m := range []string{"log", "info", "debug"} {
		_ = console.Set(m, logTo(stdout))
	}
	for _, m := range []string{"warn", "error"} {
		_ = console.Set(m, logTo(stderr))
	}
	if err := vm.Set("console", console); err != nil {
		return nil, err
	}
	jsonObj := vm.Get("JSON").ToObject(vm)
	parse, _ := goja.AssertFunction(jsonObj.Get("parse"))
	stringify, _ := goja.AssertFunction(jsonObj.Get("stringify"))

	inVal, err := parse(goja.Undefined(), vm.ToValue(input))
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	fnVal, err := vm.RunScript("code", "(async function (INPUT) {"+code+"\n})")
	if err != nil {
		return nil, err
	}
	fn, ok := goja.AssertFunction(fnVal)
	if !ok {
		return nil, errors.New("the code did not compile to a function body")
	}
	ret, err := fn(goja.Undefined(), inVal) // pending promise jobs run before this returns
	if err != nil {
		return nil, err
	}
	p, ok := ret.Export().(*goja.Promise)
	if !ok {
		return nil, errors.New("the code's function did not return a promise")
	}
	switch p.State() {
	case goja.PromiseStateRejected:
		reason := p.Result()
		if obj, ok := reason.(*goja.Object); ok {
			if stack := obj.Get("stack"); stack != nil && !goja.IsUndefined(stack) {
				return nil, errors.New(stack.String())
			}
		}
		return nil, fmt.Errorf("uncaught: %s", reason.String())
	case goja.PromiseStatePending:
		return nil, errors.New("the code's promise never settled (there is no event loop: no timers or I/O in the restricted backend)")
	}
	val := p.Result()
	if val == nil || goja.IsUndefined(val) {
		return nil, nil
	}
	s, err := stringify(goja.Undefined(), val)
	if err != nil {
		return nil, err
	}
	if goja.IsUndefined(s) {
		return nil, errors.New("the returned value cannot be encoded as JSON")
	}
	var v any
	if err := json.Unmarshal([]byte(s.String()), &v); err != nil {
		return nil, fmt.Errorf("the returned value is not JSON: %w", err)
	}
	return resultValue{v}, nil
}

// consoleBuf collects console output: the first max bytes (overflow is reported once), or the
// last max bytes with tail set.
type consoleBuf struct {
	mu       sync.Mutex
	b        strings.Builder
	max      int
	tail     bool
	over     bool
	overflow func()
}

func (c *consoleBuf) write(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tail {
		cur := c.b.String() + s
		if len(cur) > c.max {
			cur, c.over = cur[len(cur)-c.max:], true
		}
		c.b.Reset()
		c.b.WriteString(cur)
		return
	}
	if c.over {
		return
	}
	if room := c.max - c.b.Len(); len(s) > room {
		c.b.WriteString(s[:room])
		c.over = true
		if c.overflow != nil {
			go c.overflow()
		}
		return
	}
	c.b.WriteString(s)
}

func (c *consoleBuf) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

func (c *consoleBuf) suffix() string {
	s := strings.TrimSpace(strings.ToValidUTF8(c.String(), "�"))
	if s == "" {
		return ""
	}
	return "; stderr: " + s
}
