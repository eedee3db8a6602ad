package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/model"
)

// The one summary of an execution, shared by `plaita run`, `plaita start --wait` and
// `plaita execution show`: status, output or error, what it waits for and what wakes it, the
// commands that answer it (each checked by control: only what would be accepted is printed), and
// the timeline.

// summary is what one summary shows.
type summary struct {
	st    *state.Execution
	hints []control.Hint
	// cmd renders a hint's command (plaita run: its own --resume form); nil: the hint's
	// Command, a `plaita execution` line.
	cmd       func(rt engine.ResumeType, data string) string
	wake      *control.WakeUp // who wakes a suspended execution in Redis (nil: not reported)
	stateFile string          // plaita run: where the state is kept ("" none)
	files     string          // plaita run: where the flow's writefile nodes write ("" not said)
	after     func(io.Writer) // lines after the hints
}

func writeSummary(w io.Writer, s summary) {
	st := s.st
	writeHeader(w, st)
	switch st.Status {
	case state.Completed:
		if out := indentJSON(st.Output, "    "); strings.Contains(out, "\n") {
			fmt.Fprintf(w, "  output:\n    %s\n", out)
		} else {
			fmt.Fprintf(w, "  output:    %s\n", out)
		}
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
		writeSuspend(w, st.Suspend, s.wake)
	}
	if s.files != "" {
		fmt.Fprintf(w, "  files:     %s\n", s.files)
	}
	if s.stateFile != "" {
		fmt.Fprintf(w, "  state:     %s\n", s.stateFile)
	}
	writeHints(w, s.hints, s.cmd)
	if s.after != nil {
		s.after(w)
	}
	writeTimeline(w, st)
}

// writeHeader prints the lines every execution summary starts with.
func writeHeader(w io.Writer, st *state.Execution) {
	fmt.Fprintf(w, "execution %s: %s\n", st.ExecutionID, st.Status)
	flow := st.FlowID
	if st.FlowVersion != "" {
		flow += " (version " + st.FlowVersion + ")"
	}
	end := st.LastUpdate
	if st.EndTime != nil {
		end = *st.EndTime
	}
	fmt.Fprintf(w, "  flow:      %s\n", flow)
	fmt.Fprintf(w, "  steps:     %d\n", st.StepCount)
	fmt.Fprintf(w, "  duration:  %s\n", control.RoundDuration(end.Sub(st.StartTime)))
}

// writeSuspend prints what a suspended execution waits for and, when known, what wakes it.
func writeSuspend(w io.Writer, s *state.Suspend, wake *control.WakeUp) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "  waiting:   %s at node %q since %s\n", control.DescribeSuspend(s), s.Node, s.Since.UTC().Format(time.RFC3339))
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
		fmt.Fprintf(w, "  %s %s (%s)\n", label, s.Due.UTC().Format(time.RFC3339), control.Relative(time.Until(*s.Due)))
	}
	if wake == nil {
		return
	}
	if wake.Text != "" {
		fmt.Fprintf(w, "  wakes it:  %s\n", wake.Text)
	}
	if wake.Due != nil && wake.Kind != state.SuspendDelay {
		fmt.Fprintf(w, "  timeout:   %s\n", wake.Due.Text)
	}
	for _, p := range wake.Problems {
		fmt.Fprintf(w, "  note:      %s\n", p)
	}
}

// writeHints prints the hints; cmd renders the command of a resume (nil: the hint's own). A
// hint that is not a resume prints its note, then its label and command (a publish, a start).
func writeHints(w io.Writer, hints []control.Hint, cmd func(rt engine.ResumeType, data string) string) {
	for _, h := range hints {
		if h.Type == "" {
			for _, l := range h.Note {
				fmt.Fprintf(w, "  %s\n", l)
			}
			if h.Label != "" && h.Command != "" {
				fmt.Fprintf(w, "  %s:\n", h.Label)
			}
			if h.Command != "" {
				fmt.Fprintf(w, "    %s\n", h.Command)
			}
			continue
		}
		line := h.Command
		if cmd != nil {
			line = cmd(h.Type, h.Data)
		}
		fmt.Fprintf(w, "  %s:\n    %s\n", h.Label, line)
	}
}

func writeTimeline(w io.Writer, st *state.Execution) {
	fmt.Fprintln(w, "timeline:")
	if st.TimelineDropped > 0 {
		fmt.Fprintf(w, "  (%d earlier entries dropped)\n", st.TimelineDropped)
	}
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	for _, e := range st.Timeline {
		ms := ""
		if e.Millis > 0 || e.Event == "step" || e.Event == "suspended" {
			ms = fmt.Sprintf("%dms", e.Millis)
		}
		node := e.Node
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Time().Format("2006-01-02T15:04:05.000Z"), node, e.Event, ms, e.Detail)
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		if line != "" {
			fmt.Fprintln(w, strings.TrimRight(line, " \n"))
		}
	}
}

// writeRefusal prints a refused resume to stderr: the reason, then what is accepted now.
func writeRefusal(w io.Writer, r *control.Refusal, rt engine.ResumeType) {
	st := r.Execution
	fmt.Fprintf(w, "plaita: resume: execution %s is %s; this %s resume is refused: %s\n", st.ExecutionID, control.DescribeStatus(st), rt, r.Message)
	for _, l := range r.Detail {
		fmt.Fprintf(w, "  %s\n", l)
	}
	var cmds, notes []control.Hint
	for _, h := range r.Accepted {
		// A command without a note (an event's publish) is accepted now as the resumes are.
		if h.Type != "" || h.Command != "" && len(h.Note) == 0 {
			cmds = append(cmds, h)
		} else {
			notes = append(notes, h)
		}
	}
	switch {
	case len(cmds) > 0:
		// The notes beside commands restate the reason (a changed definition, the match).
		fmt.Fprintln(w, "accepted now:")
		writeHints(w, cmds, nil)
	case r.Code == "retry_budget": // its lines are in the detail already
		fmt.Fprintln(w, "no resume is accepted now.")
	case suggestsStart(notes):
		// A retry is accepted but would fail the same way (the execution's own input lacks a
		// value): what helps is a new start, which the note gives.
		fmt.Fprintln(w, "no resume would end otherwise now:")
		writeHints(w, notes, nil)
	default:
		fmt.Fprintln(w, "no resume is accepted now.")
		writeHints(w, notes, nil)
	}
	if r.Code == "flow_hash_mismatch" {
		fmt.Fprintf(w, "to unblock: %s\n", r.Unblock)
	}
	fmt.Fprintln(w, "(--force enqueues it anyway: the worker checks again and refuses what does not fit)")
}

// suggestsStart reports whether a note of hints suggests a new start instead of a resume.
func suggestsStart(hints []control.Hint) bool {
	for _, h := range hints {
		if h.SuggestsStart() {
			return true
		}
	}
	return false
}

// refusalJSON is a refused resume as --json prints it.
func refusalJSON(r *control.Refusal, rt engine.ResumeType, tenant string) map[string]any {
	st := r.Execution
	accepted := []map[string]any{}
	for _, h := range r.Accepted {
		if h.Type != "" {
			a := map[string]any{"type": h.Type, "command": h.Command}
			if h.Data != "" {
				a["data"] = json.RawMessage(h.Data)
			}
			if h.AllowFlowHashChange {
				a["allow_flow_hash_change"] = true
			}
			accepted = append(accepted, a)
		}
	}
	out := map[string]any{"execution_id": st.ExecutionID, "tenant_id": tenant, "action": "resume", "resume_type": rt,
		"result": "refused", "enqueued": false, "was": st.Status, "reason": r.Message, "accepted": accepted, "code": r.Code}
	for k, v := range r.Fields {
		out[k] = v
	}
	return out
}

// errorBody is a command's failure as --json prints it, {"error": …}: the code a program tests
// (a refusal's, else the error class's name, as the console's API answers), the message as
// stderr says it, and an invalid flow's problems each at its JSON path.
type errorBody struct {
	Code     string           `json:"code"`
	Message  string           `json:"message"`
	Problems []engine.Problem `json:"problems,omitempty"`
	Unblock  string           `json:"unblock,omitempty"`
}

// errorJSON is err (a command's exit error) as --json prints it.
func errorJSON(err error) map[string]errorBody {
	out := errorBody{Code: model.CodeOf(err), Message: err.Error()}
	var ee *exitError
	if errors.As(err, &ee) {
		// The command's name prefixes what stderr prints ("start: …"); the code says the rest.
		if _, msg, ok := strings.Cut(ee.err.Error(), ": "); ok {
			out.Message = msg
		}
		if out.Code == "" && ee.code == ExitRejected {
			out.Code = model.Invalid.String()
		}
	}
	if r := control.AsRefusal(err); r != nil {
		out.Code, out.Unblock = r.Code, r.Unblock
	}
	var ve *engine.ValidationError
	if errors.As(err, &ve) {
		// The problems are listed apart: the message keeps the line that counts them.
		msg, _, _ := strings.Cut(out.Message, "\n")
		out.Message, out.Problems = strings.TrimSuffix(msg, ":"), ve.Problems
	}
	if out.Code == "" {
		out.Code = model.Unknown.String()
	}
	return map[string]errorBody{"error": out}
}

// writeCorrupt prints what is stored for an execution whose state cannot be read.
func writeCorrupt(w io.Writer, v *control.CorruptView) {
	fmt.Fprintf(w, "execution %s (tenant %s): its stored state cannot be read\n", v.ExecutionID, v.TenantID)
	fmt.Fprintf(w, "  error:     %s\n", v.Error)
	if s := v.Salvaged; s.FlowID != "" || s.Status != "" {
		fmt.Fprintf(w, "  as stored: flow %s version %s, %s at node %q\n", s.FlowID, s.FlowVersion, s.Status, s.CurrentNode)
	}
	fmt.Fprintf(w, "  stored:    %d bytes, sha256 %s\n", v.RawBytes, v.RawSHA256)
	more := ""
	if v.RawTruncated {
		more = fmt.Sprintf(" (the first %d bytes)", v.RawShown)
	}
	fmt.Fprintf(w, "  raw%s:\n%s\n", more, v.Raw)
	fmt.Fprintln(w, "  end it (the stored bytes are replaced by a cancelled state) or remove it:")
	for _, c := range v.Commands {
		fmt.Fprintf(w, "    %s\n", c)
	}
}

func indentJSON(v any, prefix string) string {
	b, err := json.MarshalIndent(v, prefix, "  ")
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// nonNil is s, or an empty slice when s is nil: a list prints as [] in JSON, never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
