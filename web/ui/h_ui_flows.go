package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"plaita/control"
	"plaita/engine"
	"plaita/web/api"
)

// Flows: the list, a version with its picture and versions, the editor (validate with every
// problem shown at its line, publish) and starting an execution. Every operation is the API's.

func (u *uiServer) flowRoutes(g *echo.Group) {
	g.GET("/flows", u.flowsPage)
	g.GET("/flows/new", u.flowEditor)
	g.POST("/flows/validate", u.flowValidate)
	g.POST("/flows/publish", u.flowPublish)
	g.GET("/flows/:id", u.flowPage)
	g.POST("/flows/:id/run", u.flowRun)
}

func (u *uiServer) flowsPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	var list api.FlowList
	if p := u.call(c, http.MethodGet, "/api/flows?limit=200", nil, &list); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "flows.html", "", uiPage{Title: "Flows", Nav: "flows", S: s, Data: list})
}

// flowData is a flow page: the version shown, its picture, its definition.
type flowData struct {
	Flow    control.FlowShown
	SVG     template.HTML
	Graph   string // why there is no picture
	Pretty  string
	Input   string
	Nodes   []*engine.Node
	Warning []engine.Problem
}

func (u *uiServer) flowPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	path := "/api/flows/" + url.PathEscape(c.Param("id"))
	if v := c.QueryParam("version"); v != "" {
		path += "?version=" + url.QueryEscape(v)
	}
	var d flowData
	if p := u.call(c, http.MethodGet, path, nil, &d.Flow); p != nil {
		return u.fail(c, p)
	}
	d.Pretty, d.Input = pretty(d.Flow.Definition), "{}"
	if f, err := u.a.Plane().ParseFlow(d.Flow.Definition); err != nil {
		d.Graph = err.Error()
	} else {
		d.Nodes, d.Warning = f.Nodes, f.Warnings
		svg, err := u.graphs.SVG(f, nil)
		if err != nil {
			d.Graph = err.Error()
		}
		d.SVG = template.HTML(svg) // written by package graph, every text escaped there
	}
	notice := ""
	switch c.QueryParam("published") {
	case string(control.NewlyPublished):
		notice = "Version " + d.Flow.Version + " of " + d.Flow.FlowID + " is published: new executions can start on it."
	case string(control.AlreadyPublished):
		notice = "Version " + d.Flow.Version + " of " + d.Flow.FlowID + " was published with this definition already: nothing changed."
	}
	return u.render(c, http.StatusOK, "flow.html", "", uiPage{Title: "Flow " + d.Flow.FlowID, Nav: "flows", S: s, Data: d, Notice: notice})
}

// editorData is the editor page.
type editorData struct {
	Definition string
	Version    string
	From       string
	Check      *checkData
}

func (u *uiServer) flowEditor(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	d := editorData{Definition: newFlowTemplate}
	if from := c.QueryParam("from"); from != "" {
		var f control.FlowShown
		if p := u.call(c, http.MethodGet, "/api/flows/"+url.PathEscape(from), nil, &f); p != nil {
			return u.fail(c, p)
		}
		d.Definition, d.From = pretty(nextVersion(f.Definition, f.Versions)), from
	}
	return u.render(c, http.StatusOK, "flow_edit.html", "", uiPage{Title: "Edit a flow", Nav: "flows", S: s, Data: d})
}

const newFlowTemplate = `{
  "id": "my-flow",
  "version": "1",
  "start": "hello",
  "nodes": [
    {"id": "hello", "type": "log", "params": {"message": "hello {{ INPUT.name ?? 'world' }}"}, "next": "done"},
    {"id": "done", "type": "end"}
  ]
}`

// checkData is what validate or publish said of a definition: its problems, each at its line.
type checkData struct {
	Valid    bool
	FlowID   string
	Nodes    int
	Hash     string
	Problems []lineProblem
	// Count is how many problems there are; Problems are the first shownProblems of them.
	Count  int
	Lines  []annotatedLine
	Notice string
}

// check is the page's check of def with its problems.
func check(def []byte, ps []lineProblem) *checkData {
	d := &checkData{Count: len(ps), Problems: ps[:min(len(ps), shownProblems)]}
	d.Lines = annotate(def, ps)
	return d
}

// flowValidate is the editor's check: POST /api/flows/validate, its problems placed on the
// lines of the text as typed.
func (u *uiServer) flowValidate(c echo.Context) error {
	def := []byte(c.FormValue("definition"))
	var d *checkData
	if p := syntaxProblem(def); p != nil {
		d = check(def, []lineProblem{*p})
	} else {
		var v api.FlowValidation
		if p := u.call(c, http.MethodPost, "/api/flows/validate", map[string]any{"definition": json.RawMessage(def)}, &v); p != nil {
			return u.fail(c, p)
		}
		d = check(def, placeProblems(def, v.Problems))
		d.Valid, d.FlowID, d.Nodes, d.Hash = v.Valid, v.FlowID, v.Nodes, v.Hash
	}
	return u.render(c, http.StatusOK, "flow_edit.html", "check", uiPage{Data: d})
}

// flowPublish publishes through POST /api/flows: a success goes to the version's page, an
// invalid definition shows its problems at their lines, a conflict its explanation.
func (u *uiServer) flowPublish(c echo.Context) error {
	def := []byte(c.FormValue("definition"))
	if p := syntaxProblem(def); p != nil {
		return u.render(c, http.StatusOK, "flow_edit.html", "check", uiPage{Data: check(def, []lineProblem{*p})})
	}
	body := map[string]any{"definition": json.RawMessage(def)}
	if v := strings.TrimSpace(c.FormValue("version")); v != "" {
		body["version"] = v
	}
	var pub api.FlowPublished
	if p := u.call(c, http.MethodPost, "/api/flows", body, &pub); p != nil {
		if p.Code != "invalid_request" && p.Code != "invalid_flow" || len(p.Errors) == 0 {
			return u.fail(c, p)
		}
		var ps []api.FlowProblem
		for _, e := range p.Errors {
			ps = append(ps, api.FlowProblem{Path: strings.TrimPrefix(strings.TrimPrefix(e.Location, "definition"), "."), Message: e.Message})
		}
		return u.render(c, http.StatusOK, "flow_edit.html", "check", uiPage{Data: check(def, placeProblems(def, ps))})
	}
	c.Response().Header().Set("HX-Redirect", "/ui/flows/"+url.PathEscape(pub.FlowID)+"?version="+url.QueryEscape(pub.Version)+"&published="+string(pub.Result))
	return c.NoContent(http.StatusOK)
}

// flowRun starts an execution through POST /api/executions and goes to its page.
func (u *uiServer) flowRun(c echo.Context) error {
	input := strings.TrimSpace(c.FormValue("input"))
	if input == "" {
		input = "{}"
	}
	if !json.Valid([]byte(input)) {
		return u.fail(c, api.NewProblem(http.StatusBadRequest, "invalid_input", "the input is not valid JSON"))
	}
	body := map[string]any{"flow_id": c.Param("id"), "input": json.RawMessage(input)}
	if v := c.FormValue("version"); v != "" {
		body["version"] = v
	}
	var started api.ExecutionStarted
	if p := u.call(c, http.MethodPost, "/api/executions", body, &started); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Redirect", "/ui/executions/"+url.PathEscape(started.ExecutionID))
	return c.NoContent(http.StatusOK)
}

// ---- problems at their lines ----

// lineProblem is a problem with the line of the text it is about (0: the whole document).
type lineProblem struct {
	Path    string
	Message string
	Line    int
}

// annotatedLine is one line of the definition with the problems placed on it, or (Gap) lines
// left out.
type annotatedLine struct {
	N        int
	Text     string
	Problems []lineProblem
	Gap      bool
}

// syntaxProblem is the problem of text that is not JSON at all, at the line of the error.
func syntaxProblem(def []byte) *lineProblem {
	if len(bytes.TrimSpace(def)) == 0 {
		return &lineProblem{Message: "the definition is empty"}
	}
	var v any
	err := json.Unmarshal(def, &v)
	if err == nil {
		return nil
	}
	p := &lineProblem{Message: "not valid JSON: " + err.Error()}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		p.Line = lineAt(def, int(se.Offset))
		p.Message = fmt.Sprintf("not valid JSON at line %d: %v", p.Line, se)
	}
	return p
}

func lineAt(src []byte, offset int) int {
	offset = min(max(offset, 0), len(src))
	return bytes.Count(src[:offset], []byte("\n")) + 1
}

// placeProblems puts each problem on the line of its JSON path in def, or of the nearest
// enclosing value that is there (a required field that is missing is about its object).
func placeProblems(def []byte, ps []api.FlowProblem) []lineProblem {
	lines := pathLines(def)
	out := make([]lineProblem, 0, len(ps))
	for _, p := range ps {
		lp := lineProblem{Path: p.Path, Message: p.Message}
		for path := p.Path; ; path = parentPath(path) {
			if l, ok := lines[path]; ok {
				lp.Line = l
				break
			}
			if path == "" {
				break
			}
		}
		out = append(out, lp)
	}
	return out
}

// parentPath is the path one step up: nodes[2].params.url → nodes[2].params → nodes[2] →
// nodes → "".
func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

// Bounds of the annotated definition: a page about a definition grows with its problems, not
// with its size (a megabyte of text is not sent back as tens of megabytes of markup).
const (
	// annotateWhole: a definition of at most this many lines is shown whole; a longer one only
	// around its problems (annotateContext lines either side), the rest elided.
	annotateWhole   = 2000
	annotateContext = 3
	// annotateLineBytes cuts a line shown (a definition on one line is one line).
	annotateLineBytes = 400
	// shownProblems is how many problems the list shows; the count says how many there are.
	shownProblems = 200
)

// annotate splits def into lines with the problems placed on them; problems of no line are
// left to the list above the text. See annotateWhole for what is shown of a long definition.
func annotate(def []byte, ps []lineProblem) []annotatedLine {
	text := strings.Split(string(def), "\n")
	at := map[int][]lineProblem{}
	for _, p := range ps {
		if p.Line >= 1 && p.Line <= len(text) {
			at[p.Line] = append(at[p.Line], p)
		}
	}
	shown := func(n int) bool { return true }
	if len(text) > annotateWhole {
		shown = func(n int) bool {
			for l := n - annotateContext; l <= n+annotateContext; l++ {
				if len(at[l]) > 0 {
					return true
				}
			}
			return false
		}
	}
	var out []annotatedLine
	gap := false
	for i, t := range text {
		n := i + 1
		if !shown(n) {
			gap = true
			continue
		}
		if gap {
			out = append(out, annotatedLine{Gap: true})
			gap = false
		}
		out = append(out, annotatedLine{N: n, Text: truncateBytes(t, annotateLineBytes), Problems: at[n]})
	}
	if gap {
		out = append(out, annotatedLine{Gap: true})
	}
	return out
}

// truncateBytes cuts s to at most n bytes on a rune boundary, marking the cut.
func truncateBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// nextVersion is def with its "version" moved past every published one, so that "Edit as a
// new version" publishes a new version instead of being refused as a changed one: a number
// goes to the highest published number + 1, anything else gets "-2", "-3" … until it is new.
// Only the value is rewritten: the definition keeps its text, keys and layout. A definition
// without a top-level string "version" is returned as it is.
func nextVersion(def json.RawMessage, published []control.VersionShown) json.RawMessage {
	from, to, cur, ok := topLevelString(def, "version")
	if !ok {
		return def
	}
	taken := map[string]bool{}
	high := 0
	for _, v := range published {
		taken[v.Version] = true
		if n, err := strconv.Atoi(v.Version); err == nil && n > high {
			high = n
		}
	}
	next := ""
	if _, err := strconv.Atoi(cur); err == nil {
		next = strconv.Itoa(high + 1)
	} else {
		for i := 2; next == "" || taken[next]; i++ {
			next = cur + "-" + strconv.Itoa(i)
		}
	}
	quoted, _ := json.Marshal(next)
	out := append(append(append(json.RawMessage{}, def[:from]...), quoted...), def[to:]...)
	return out
}

// topLevelString finds the string value of key in the object def: its bytes [from, to) and its
// value.
func topLevelString(def json.RawMessage, key string) (from, to int, value string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(def))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, "", false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, 0, "", false
		}
		before := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, "", false
		}
		if t != key {
			continue
		}
		end := int(dec.InputOffset())
		if json.Unmarshal(raw, &value) != nil {
			return 0, 0, "", false
		}
		start := bytes.Index(def[before:end], raw)
		if start < 0 {
			return 0, 0, "", false
		}
		return before + start, before + start + len(raw), value, true
	}
	return 0, 0, "", false
}
