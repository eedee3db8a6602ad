package roles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/presence"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// executionCommand groups the operator commands over stored executions. They use the same
// library calls as the console: the tenant store (List, Load, Delete, SetCancel) and
// queue.Enqueue for resumes.
func executionCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "execution",
		Usage:     "list, show, cancel, resume or delete executions in Redis",
		UsageText: "plaita execution list|show|cancel|resume|delete [ID] [flags]",
		Description: "Every subcommand runs the worker's configuration preflight and connects to PLAITA_REDIS_URL.\n" +
			"Exit status: 0 done; 1 failure or unknown execution id; 2 bad usage.",
		Action: subcommandsOnly,
		Commands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list the tenant's executions, newest first",
				UsageText: "plaita execution list [--tenant T] [--limit N] [--cursor C] [--json]",
				Flags: cliFlags(tenantFlag(),
					&cli.IntFlag{Name: "limit", Value: store.DefaultListLimit, Usage: fmt.Sprintf("executions per page (1–%d)", store.MaxListLimit)},
					&cli.StringFlag{Name: "cursor", Usage: "continue after the page that printed this cursor"},
					jsonFlag("print the page as JSON: items, next_cursor, skipped, degraded")),
				Action: func(ctx context.Context, cmd *cli.Command) error { return executionList(ctx, cmd, stdout, stderr) },
			},
			{
				Name:      "show",
				Usage:     "print one execution's summary, what wakes it, and its timeline (or its state as JSON)",
				UsageText: "plaita execution show ID [--tenant T] [--json]",
				Description: "A suspended execution's summary says which role wakes it and whether one is registered and\n" +
					"alive, and for a due time whether its delay-queue entry is there (--json: the wake_up object).",
				Flags: cliFlags(tenantFlag(), jsonFlag("print the whole execution state as JSON, with wake_up for a suspended one")),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return withExecution(ctx, cmd, "show", stderr, executionOp{fn: func(k *conn, st *state.Execution) error {
						wake := k.wakeUpFor(ctx, st, time.Now())
						if cmd.Bool("json") {
							return writeJSON(stdout, shownState{Execution: st, WakeUp: wake})
						}
						adv, err := k.adviceFor(ctx, st, nil)
						if err != nil {
							return cliFail("show", "execution %s: %v", st.ExecutionID, err)
						}
						writeSummary(stdout, st, adv, k.sp.Tenant(), wake)
						return nil
					}, corrupt: func(k *conn, ce *store.CorruptStateError) error {
						return showCorrupt(stdout, cmd.Bool("json"), k, ce)
					}})
				},
			},
			{
				Name:      "cancel",
				Usage:     "cancel an execution (raises its cancel flag and enqueues a cancel resume)",
				UsageText: "plaita execution cancel ID [--tenant T] [--json]",
				Description: "A running execution stops at its next step boundary; a suspended one is ended by the\n" +
					"cancel resume. An execution already cancelled is left as it is (exit 0, \"already cancelled\");\n" +
					"a completed or failed one is refused (exit 1).",
				Flags: cliFlags(tenantFlag(), jsonFlag("print a JSON object saying what was done")),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return withExecution(ctx, cmd, "cancel", stderr, executionOp{fn: func(k *conn, st *state.Execution) error {
						return executionCancel(ctx, cmd, k, st, stdout)
					}, corrupt: func(k *conn, ce *store.CorruptStateError) error {
						return cancelCorrupt(ctx, k, ce, cmd.Bool("json"), stdout)
					}})
				},
			},
			{
				Name:      "resume",
				Usage:     "enqueue a resume of an execution (approval answer, event, retry …)",
				UsageText: "plaita execution resume ID --type continue|retry|event|timeout|cancel|approval [--data JSON|@file] [--tenant T] [--force] [--json]",
				Description: "The flow id and version come from the stored state. Before enqueuing, the resume is checked\n" +
					"the way the worker will check it — against the execution's status and suspension, the published\n" +
					"definition (an event must satisfy the wait's match), and for a retry the wake-up budgets\n" +
					"(g1wakeups, nofail) and the step limit; a resume that would be refused is not enqueued (exit 1)\n" +
					"and the reason and the accepted commands are printed. --force skips the check (the worker\n" +
					"still decides). A completed or cancelled execution is always refused (exit 1).",
				Flags: cliFlags(tenantFlag(),
					&cli.StringFlag{Name: "type", Usage: "continue, retry, event, timeout, cancel or approval"},
					&cli.StringFlag{Name: "data", Usage: "the event, the approval answer …: inline JSON, or @path"},
					&cli.BoolFlag{Name: "force", Usage: "enqueue without checking first (the worker still refuses what does not fit)"},
					jsonFlag("print a JSON object saying what was done (or why not)")),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					if !cmd.IsSet("type") {
						return cliUsage("resume", "--type continue|retry|event|timeout|cancel|approval is required")
					}
					rt, err := engine.ParseResumeType(cmd.String("type"))
					if err != nil {
						return cliUsage("resume", "--type %q: use continue, retry, event, timeout, cancel or approval", cmd.String("type"))
					}
					var data json.RawMessage
					read := func(k *conn) error {
						if cmd.IsSet("data") {
							data, err = readDoc(ctx, "resume", "data", cmd.String("data"), k.stateBound())
						}
						return err
					}
					return withExecution(ctx, cmd, "resume", stderr, executionOp{read: read, fn: func(k *conn, st *state.Execution) error {
						return executionResume(ctx, cmd, k, st, rt, data, stdout, stderr)
					}})
				},
			},
			{
				Name:      "delete",
				Usage:     "delete an execution's state and keys (writes a tombstone)",
				UsageText: "plaita execution delete ID [--tenant T] [--force] [--json]",
				Flags: cliFlags(tenantFlag(),
					&cli.BoolFlag{Name: "force", Usage: "delete even a running (or pending) execution"},
					jsonFlag("print a JSON object saying what was done")),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					del := func(k *conn, id string, was state.Status) error {
						if err := k.ts.Delete(ctx, id); err != nil {
							return cliFail("delete", "execution %s: %v", id, err)
						}
						if cmd.Bool("json") {
							return writeJSON(stdout, map[string]any{"execution_id": id, "tenant_id": k.sp.Tenant(),
								"action": "delete", "result": "deleted", "deleted": true, "was": was})
						}
						fmt.Fprintf(stdout, "execution %s: deleted (was %s)\n", id, was)
						return nil
					}
					return withExecution(ctx, cmd, "delete", stderr, executionOp{fn: func(k *conn, st *state.Execution) error {
						if (st.Status == state.Running || st.Status == state.Pending) && !cmd.Bool("force") {
							return cliFail("delete", "execution %s is %s; cancel it first, or pass --force", st.ExecutionID, st.Status)
						}
						return del(k, st.ExecutionID, st.Status)
					}, corrupt: func(k *conn, ce *store.CorruptStateError) error {
						// No worker can run an unreadable state: nothing to cancel first.
						return del(k, ce.ID, "corrupt")
					}})
				},
			},
		},
	}
}

// resumeEnvelope is a resume of st's execution, on the flow version it runs.
func resumeEnvelope(st *state.Execution, rt engine.ResumeType, data json.RawMessage) queue.Envelope {
	return queue.Envelope{Kind: queue.KindResume, FlowID: st.FlowID, FlowVersion: st.FlowVersion,
		ExecutionID: st.ExecutionID, ResumeType: rt, ResumeData: data}
}

// executionCancel raises the cancel flag and enqueues a cancel resume; an execution already
// cancelled is what was asked for, so it is a success that changes nothing.
func executionCancel(ctx context.Context, cmd *cli.Command, k *conn, st *state.Execution, stdout io.Writer) error {
	out := map[string]any{"execution_id": st.ExecutionID, "tenant_id": k.sp.Tenant(), "action": "cancel", "was": st.Status}
	switch {
	case st.Status == state.Cancelled:
		if cmd.Bool("json") {
			out["result"], out["enqueued"] = "already_cancelled", false
			return writeJSON(stdout, out)
		}
		fmt.Fprintf(stdout, "execution %s: already cancelled; nothing to do\n", st.ExecutionID)
		return nil
	case st.Status.Terminal():
		return cliFail("cancel", "execution %s is already %s; nothing to cancel", st.ExecutionID, st.Status)
	}
	if err := k.ts.SetCancel(ctx, st.ExecutionID); err != nil {
		return cliFail("cancel", "execution %s: %v", st.ExecutionID, err)
	}
	msgID, err := k.enqueue(ctx, resumeEnvelope(st, engine.ResumeCancel, nil))
	if err != nil {
		return cliFail("cancel", "execution %s: cancel flag raised, but the cancel resume was not enqueued: %v", st.ExecutionID, err)
	}
	if cmd.Bool("json") {
		out["result"], out["enqueued"], out["message_id"] = "cancel_requested", true, msgID
		return writeJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "execution %s: cancel requested (was %s)\n", st.ExecutionID, st.Status)
	return nil
}

// executionResume checks the resume (unless --force) and enqueues it.
func executionResume(ctx context.Context, cmd *cli.Command, k *conn, st *state.Execution, rt engine.ResumeType, data json.RawMessage,
	stdout, stderr io.Writer) error {
	const name = "resume"
	if st.Status == state.Completed || st.Status == state.Cancelled {
		return cliFail(name, "execution %s is %s; it cannot be resumed", st.ExecutionID, st.Status)
	}
	force := cmd.Bool("force")
	if !force {
		var v any
		if len(data) > 0 {
			if err := json.Unmarshal(data, &v); err != nil {
				return cliUsage(name, "--data: %v", err)
			}
		}
		adv, err := k.adviceFor(ctx, st, nil)
		if err != nil {
			return cliFail(name, "execution %s: %v", st.ExecutionID, err)
		}
		if ref := checkResume(st, adv, rt, v); ref != nil {
			if cmd.Bool("json") {
				if err := writeJSON(stdout, ref.json(st, k.sp.Tenant())); err != nil {
					return cliFail(name, "write: %v", err)
				}
			}
			ref.write(stderr, st, k.sp.Tenant())
			return &exitError{code: ExitFailure, err: fmt.Errorf("%s: execution %s: %s", name, st.ExecutionID, ref.reason), printed: true}
		}
	}
	msgID, err := k.enqueue(ctx, resumeEnvelope(st, rt, data))
	if err != nil {
		return cliFail(name, "execution %s: %v", st.ExecutionID, err)
	}
	if cmd.Bool("json") {
		return writeJSON(stdout, map[string]any{"execution_id": st.ExecutionID, "tenant_id": k.sp.Tenant(), "flow_id": st.FlowID,
			"flow_version": st.FlowVersion, "action": "resume", "resume_type": rt, "result": "enqueued", "enqueued": true,
			"checked": !force, "was": st.Status, "queue": config.QueueName.In(k.cfg), "message_id": msgID})
	}
	fmt.Fprintf(stdout, "execution %s: %s resume enqueued (was %s)\n", st.ExecutionID, rt, st.Status)
	if force {
		fmt.Fprintln(stdout, "not checked (--force): the worker decides whether it fits")
	}
	return nil
}

// executionOp is what a subcommand does with the execution it names: fn with its state, and
// corrupt (when set) when the stored state cannot be read. read (when set) runs after the
// preflight and before connecting: the command's documents are read and checked first.
type executionOp struct {
	read    func(*conn) error
	fn      func(*conn, *state.Execution) error
	corrupt func(*conn, *store.CorruptStateError) error
}

// withExecution checks the ID argument, connects and loads the execution, then calls op.fn (or
// op.corrupt). Without op.corrupt, an unreadable state is a failure that says what can still be
// done with it.
func withExecution(ctx context.Context, cmd *cli.Command, name string, stderr io.Writer, op executionOp) error {
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one execution id: plaita execution %s ID", name)
	}
	id := cmd.Args().First()
	if err := keys.ValidID(id); err != nil {
		return cliUsage(name, "%q is not an execution id: %v", id, err)
	}
	k, err := prepare(cmd, name, stderr)
	if err != nil {
		return err
	}
	if op.read != nil {
		if err := op.read(k); err != nil {
			return err
		}
	}
	if err := k.dial(name); err != nil {
		return err
	}
	defer k.close()
	st, err := k.ts.Load(ctx, id)
	var ce *store.CorruptStateError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return cliFail(name, "no execution %s in tenant %s", id, k.sp.Tenant())
	case errors.As(err, &ce) && op.corrupt != nil:
		return op.corrupt(k, ce)
	case ce != nil:
		return cliFail(name, "%v: no worker can run it; `%s` prints what is stored, `%s` ends it, `%s` removes it", ce,
			executionCommandLine("show", id, k.sp.Tenant()), executionCommandLine("cancel", id, k.sp.Tenant()),
			executionCommandLine("delete", id, k.sp.Tenant()))
	case err != nil:
		return cliFail(name, "execution %s: %v", id, err)
	}
	return op.fn(k, st)
}

func executionList(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "list"
	limit := cmd.Int("limit")
	if limit < 1 || limit > store.MaxListLimit {
		return cliUsage(name, "--limit %d: use 1 to %d", limit, store.MaxListLimit)
	}
	k, err := connect(cmd, name, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	page, err := k.ts.List(ctx, store.ListRequest{Cursor: cmd.String("cursor"), Limit: limit})
	if err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return cliUsage(name, "--cursor: %v", err)
		}
		return cliFail(name, "%v", err)
	}
	if cmd.Bool("json") {
		items := page.Items
		if items == nil {
			items = []store.Summary{}
		}
		return writeJSON(stdout, map[string]any{"tenant_id": k.sp.Tenant(), "items": items,
			"next_cursor": page.NextCursor, "skipped": page.Skipped, "degraded": page.Degraded})
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EXECUTION\tSTATUS\tFLOW\tVERSION\tSTEPS\tSTARTED\tNODE")
	for _, s := range page.Items {
		node := s.CurrentNode
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", s.ExecutionID, s.Status, s.FlowID, s.FlowVersion, s.StepCount,
			s.StartTime.UTC().Format(time.RFC3339), node)
	}
	tw.Flush()
	stdout.Write(buf.Bytes())
	fmt.Fprintf(stdout, "%d execution(s) in tenant %s\n", len(page.Items), k.sp.Tenant())
	if page.Degraded {
		fmt.Fprintf(stdout, "degraded: %d index member(s) skipped (invalid, missing or corrupt; `plaita reindex` rebuilds the index)\n", page.Skipped)
	}
	if page.NextCursor != "" {
		fmt.Fprintf(stdout, "next page:\n  plaita execution list --limit %d --cursor %s\n", limit, shellQuote(page.NextCursor))
	}
	return nil
}

// writeSummary prints an execution stored in Redis: status, what it waits for and what wakes
// it (wake; nil when unknown), the commands that answer it (each checked against adv: only what
// would be accepted is printed) and the timeline.
func writeSummary(w io.Writer, st *state.Execution, adv *advice, tenant string, wake *wakeUp) {
	writeHeader(w, st)
	switch st.Status {
	case state.Completed:
		fmt.Fprintf(w, "  output:    %s\n", indentJSON(st.Output, "    "))
	case state.Error:
		if e := st.Error; e != nil {
			at := ""
			if e.Node != "" {
				at = fmt.Sprintf(" at node %q", e.Node)
			}
			fmt.Fprintf(w, "  error:     %s%s: %s\n", e.Type, at, e.Message)
		}
	case state.Running:
		fmt.Fprintf(w, "  at node:   %s\n", st.CurrentNode)
	case state.Suspended:
		if s := st.Suspend; s != nil {
			fmt.Fprintf(w, "  waiting:   %s at node %q since %s\n", describeSuspend(s), s.Node, s.Since.UTC().Format(time.RFC3339))
			if s.Match != "" {
				fmt.Fprintf(w, "  match:     %s\n", s.Match)
			}
			if s.Message != "" {
				fmt.Fprintf(w, "  message:   %s\n", s.Message)
			}
			if s.Due != nil {
				// Only the time: whether anything will fire it is the wake-up report's to say.
				label := "times out:"
				if s.Kind == state.SuspendDelay {
					label = "due:      "
				}
				fmt.Fprintf(w, "  %s %s\n", label, s.Due.UTC().Format(time.RFC3339))
			}
			writeWakeUp(w, wake)
		}
	}
	writeHints(w, adv.hints(st), cliCommand(st.ExecutionID, tenant))
	fmt.Fprintln(w, "timeline:")
	if st.TimelineDropped > 0 {
		fmt.Fprintf(w, "  (%d earlier entries dropped)\n", st.TimelineDropped)
	}
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	for _, e := range st.Timeline {
		node := e.Node
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Time().Format("2006-01-02T15:04:05.000Z"), node, e.Event, e.Detail)
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		if line != "" {
			fmt.Fprintln(w, strings.TrimRight(line, " \n"))
		}
	}
}

// ---- who wakes a suspended execution ----

// `plaita execution show` says, for a suspended execution, which role wakes it and whether one
// is registered and alive (the registry: store.Registry, written by every role's presence
// heartbeat), and for a due time whether its delay-queue entry is there (queue.Delay.Lookup:
// the member is a pure function of the state). A due time alone says nothing about whether
// anything will fire it; this says.

// wakeRole is how many instances of a role the registry knows.
type wakeRole struct {
	Built     bool     `json:"built"`     // this build has the role
	Alive     int      `json:"alive"`     // registered, fresh heartbeat, status running
	Stopping  int      `json:"stopping"`  // registered, but draining or stopping
	Instances []string `json:"instances"` // the alive ones
}

// wakeDue is a due time (a delay's, or a wait's or an approval's timeout), its delay-queue
// entry and the delay role that sends it.
type wakeDue struct {
	ResumeType  engine.ResumeType `json:"resume_type"`
	Due         time.Time         `json:"due"`
	DueInMillis int64             `json:"due_in_ms"` // negative once it has passed
	// Entry is scheduled | retrying (an enqueue failed; see attempts) | dead (given up) |
	// missing (not in the queue: sent already, or never written) | unknown (unreadable).
	Entry      string     `json:"entry"`
	EntryAt    *time.Time `json:"entry_at,omitempty"` // when the entry is sent
	Attempts   int64      `json:"attempts,omitempty"`
	DeadReason string     `json:"dead_reason,omitempty"`
	// Unschedulable says why the due time cannot be on the delay queue at all (before 1970,
	// the zero time …): its entry is missing because it was never written.
	Unschedulable string `json:"unschedulable,omitempty"`
	Text          string `json:"text"`
}

// wakeUp is the wake-up report of a suspended execution.
type wakeUp struct {
	Kind     string              `json:"kind"` // the suspension: delay | event | approval
	By       string              `json:"by"`   // the role that wakes it: delay | filter | console
	Text     string              `json:"text"`
	Roles    map[string]wakeRole `json:"roles"`
	Due      *wakeDue            `json:"due,omitempty"` // delay: the wake-up itself; event, approval: the timeout
	Problems []string            `json:"problems,omitempty"`
}

// wakeUpFor builds the report of st; nil when st is not suspended. What cannot be read (the
// registry, the delay queue) is said in Problems, never an error: show still shows the rest.
func (k *conn) wakeUpFor(ctx context.Context, st *state.Execution, now time.Time) *wakeUp {
	s := st.Suspend
	if st.Status != state.Suspended || s == nil {
		return nil
	}
	w := &wakeUp{Kind: s.Kind, Roles: map[string]wakeRole{}}
	live, err := store.NewRegistry(k.c, keys.DefaultRoot).Instances(ctx, now, presence.TTLFactor*presence.DefaultHeartbeatInterval)
	if err != nil {
		w.Problems = append(w.Problems, fmt.Sprintf("the registry cannot be read: %v", err))
	}
	count := func(role config.Role) wakeRole {
		r := wakeRole{Built: lookupSpec(role).Built, Instances: []string{}}
		for _, rec := range live.Live {
			// plaita dev runs every role in one process.
			if rec.Role != string(role) && rec.Role != string(config.RoleDev) {
				continue
			}
			if rec.Status == presence.StatusRunning {
				r.Alive++
				r.Instances = append(r.Instances, rec.InstanceID)
			} else {
				r.Stopping++
			}
		}
		w.Roles[string(role)] = r
		return r
	}
	cmd := cliCommand(st.ExecutionID, k.sp.Tenant())
	if s.Due != nil {
		rt := engine.ResumeTimeout
		if s.Kind == state.SuspendDelay {
			rt = engine.ResumeContinue
		}
		w.Due = k.dueReport(ctx, st, rt, now, count(config.RoleDelay), cmd(rt, ""), w)
	}
	switch s.Kind {
	case state.SuspendDelay:
		w.By = string(config.RoleDelay)
		if w.Due != nil {
			w.Text = w.Due.Text
		}
	case state.SuspendEvent:
		w.By = string(config.RoleFilter)
		w.Text = fmt.Sprintf("an event of type %q — %s", s.EventType, roleText(config.RoleFilter, count(config.RoleFilter),
			"nothing delivers the event until one runs; the commands below deliver one by hand"))
	case state.SuspendApproval:
		w.By = string(config.RoleConsole)
		c := count(config.RoleConsole)
		console := "the console"
		switch {
		case !c.Built:
			console += " (not built yet)"
		default:
			console += " (" + roleText(config.RoleConsole, c, "") + ")"
		}
		w.Text = fmt.Sprintf("an answer through %s or `%s`", console, cmd(engine.ResumeApproval, `{"approved": true}`))
	}
	return w
}

// dueReport looks the due time's delay-queue entry up and says whether anything will send it.
func (k *conn) dueReport(ctx context.Context, st *state.Execution, rt engine.ResumeType, now time.Time, delayRole wakeRole,
	command string, w *wakeUp) *wakeDue {
	s := st.Suspend
	d := &wakeDue{ResumeType: rt, Due: s.Due.UTC(), DueInMillis: s.Due.Sub(now).Milliseconds(), Entry: "unknown"}
	what := "continue it"
	if rt == engine.ResumeTimeout {
		what = "time it out"
	}
	// A due time the queue refuses was never written (the worker's Schedule refuses it too):
	// nothing is looked up, and nothing is said to have been sent.
	if err := queue.CheckDelayDue(*s.Due); err != nil {
		d.Entry, d.Unschedulable = "missing", strings.TrimPrefix(err.Error(), queue.ErrBadDelayEntry.Error()+": ")
		d.Text = fmt.Sprintf("no delay-queue entry, and none can be written: %s; nothing will %s: `%s`", d.Unschedulable, what, command)
		return d
	}
	entry := queue.DelayEntry{ExecutionID: st.ExecutionID, TenantID: k.sp.Tenant(), FlowID: st.FlowID, FlowVersion: st.FlowVersion,
		ResumeType: rt, Node: s.Node, Due: *s.Due}
	q, err := queue.NewDelay(k.c, settings.DelayQueue(k.cfg))
	var l queue.DelayLookup
	if err == nil {
		l, err = q.Lookup(ctx, entry)
	}
	switch {
	case err != nil:
		w.Problems = append(w.Problems, fmt.Sprintf("the delay queue cannot be read: %v", err))
	case l.Scheduled: // even with a :dead record: scheduled again since (a redelivery registers it anew)
		d.Entry, d.Attempts = "scheduled", l.Attempts
		if l.Attempts > 0 {
			d.Entry = "retrying"
		}
		at := l.At
		d.EntryAt = &at
	case l.Dead != nil:
		d.Entry, d.DeadReason = "dead", l.Dead.Reason
	default:
		d.Entry = "missing"
	}
	when := "due in " + roundDuration(s.Due.Sub(now))
	if !s.Due.After(now) {
		when = "was due " + roundDuration(now.Sub(*s.Due)) + " ago"
	}
	switch {
	case d.Entry == "dead":
		d.Text = fmt.Sprintf("%s — its delay-queue entry was given up (%s, in %s): nothing will %s; `%s`",
			when, d.DeadReason, queue.DelayDeadKey(settings.DelayQueue(k.cfg)), what, command)
	case d.Entry == "missing" && s.Due.After(now):
		d.Text = fmt.Sprintf("%s — no delay-queue entry: nothing will %s; `%s`", when, what, command)
	case d.Entry == "missing":
		// Sent (its resume waits in the task stream or runs) or never written (the suspending
		// delivery failed to register it and is redelivered, or it was removed): the queue
		// alone cannot tell which, so neither is claimed.
		d.Text = fmt.Sprintf("%s — not in the delay queue (its wake-up was sent, or never written); if it stays suspended: `%s`", when, command)
	default:
		d.Text = when + " — " + roleText(config.RoleDelay, delayRole, "nothing will "+what+" until one runs (`plaita delay`)")
		if d.Entry == "retrying" {
			d.Text += fmt.Sprintf("; %d enqueue(s) of its wake-up failed, next try %s", d.Attempts, relative(d.EntryAt.Sub(now)))
		}
	}
	return d
}

// roleText says how many instances of role are alive: "delay role: 1 alive", or "no delay
// role registered" and then none, what that means.
func roleText(role config.Role, r wakeRole, none string) string {
	switch {
	case r.Alive > 0:
		return fmt.Sprintf("%s role: %d alive", role, r.Alive)
	case r.Stopping > 0:
		return fmt.Sprintf("%s role: 0 alive (%d stopping)", role, r.Stopping) + prefixed(": ", none)
	}
	text := fmt.Sprintf("no %s role registered", role)
	if !r.Built {
		text += " (not built yet)"
	}
	return text + prefixed(": ", none)
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

// writeWakeUp prints the report's lines of the summary.
func writeWakeUp(w io.Writer, wu *wakeUp) {
	if wu == nil {
		return
	}
	if wu.Text != "" {
		fmt.Fprintf(w, "  wakes it:  %s\n", wu.Text)
	}
	if wu.Due != nil && wu.Kind != state.SuspendDelay {
		fmt.Fprintf(w, "  timeout:   %s\n", wu.Due.Text)
	}
	for _, p := range wu.Problems {
		fmt.Fprintf(w, "  note:      %s\n", p)
	}
}

// shownState is `execution show --json`: the state as stored, plus the wake-up report of a
// suspended execution.
type shownState struct {
	*state.Execution
	WakeUp *wakeUp `json:"wake_up,omitempty"`
}
