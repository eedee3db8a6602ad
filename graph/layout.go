// Package graph draws a flow as SVG: a layered layout by dagre (vendored from npm, run in goja
// — no browser, no cgo, nothing fetched) and an SVG written here from its coordinates. The
// console's pages and `plaita flow graph` draw with it, so a flow looks the same in both; an
// execution's picture is the flow's with the path taken, the current node and the failed node
// marked (Trace).
//
// Why dagre in goja and not Graphviz (github.com/goccy/go-graphviz, Graphviz compiled to
// WebAssembly): Graphviz lays a 50-node flow out in 12–25 ms against dagre's ~300 ms in goja,
// but it adds 6 MB to the binary and its package init compiles the WebAssembly module in every
// process that links it — 0.9 s at a cold start, 25 ms with the compilation cache it writes to
// $TMPDIR — so every CLI command and role would pay for a picture only the console draws.
// dagre adds 100 KB (goja is linked already, for the code node) and its layout depends only
// on the flow, so it is computed once per flow version and cached: polling an execution's
// page draws from the cache. Both are deterministic: the same definition gives the same bytes.
package graph

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"

	"plaita/engine"
)

//go:embed dagre/dagre.min.js
var dagreJS string

// MaxNodes is the largest flow drawn: dagre's layout grows faster than linearly, and past a
// few hundred nodes a picture is no longer read anyway.
const MaxNodes = 400

// ErrTooLarge is a flow with more than MaxNodes nodes.
var ErrTooLarge = errors.New("flow too large to draw")

// layoutTimeout bounds one layout (goja is interrupted past it).
const layoutTimeout = 20 * time.Second

// Sizes of the drawing, in SVG user units (pixels at scale 1). Text is monospace, so a label's
// width is its length times charWidth, the same on every machine.
const (
	fontSize   = 12
	charWidth  = 7.3 // of a 12 px monospace glyph, rounded up
	lineHeight = 16
	padX       = 14
	padY       = 10
	margin     = 16
)

// Box is a node's place: its centre and size.
type Box struct {
	X, Y, W, H float64
}

// EdgeLayout is one edge of Flow.Edges with its route.
type EdgeLayout struct {
	engine.Edge
	Points  [][2]float64 // from the source's border to the target's
	LabelAt [2]float64   // where its label is centred (labelled edges)
}

// Layout is where a flow's nodes and edges are drawn.
type Layout struct {
	Width, Height float64
	Nodes         map[string]Box
	Edges         []EdgeLayout // in Flow.Edges order
}

// Engine lays flows out: one goja runtime with dagre loaded (made on first use), used by one
// layout at a time, and a cache of layouts by flow hash.
type Engine struct {
	mu    sync.Mutex
	vm    *goja.Runtime
	cache map[string]*Layout
}

// maxCached bounds the cache; when full it starts again (flows change rarely, a console shows
// few at a time).
const maxCached = 256

// New is an engine; nothing is loaded until the first layout.
func New() *Engine { return &Engine{cache: map[string]*Layout{}} }

// nodeLines are the text lines of a node's box: its id, then its type (and name).
func nodeLines(n *engine.Node) []string {
	kind := n.Type
	if n.Name != "" {
		kind += " · " + n.Name
	}
	return []string{n.ID, truncate(kind, 40)}
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func textWidth(s string) float64 { return float64(len([]rune(s))) * charWidth }

// edgeLabel is what an edge says on the picture: nothing for a plain next.
func edgeLabel(e engine.Edge) string {
	if e.Label == "next" {
		return ""
	}
	return e.Label
}

// layoutInput is what the script is given: nodes with sizes, edges with label sizes.
type layoutInput struct {
	Nodes []layoutNode `json:"nodes"`
	Edges []layoutEdge `json:"edges"`
}

type layoutNode struct {
	ID string  `json:"id"`
	W  float64 `json:"w"`
	H  float64 `json:"h"`
}

type layoutEdge struct {
	From string  `json:"from"`
	To   string  `json:"to"`
	W    float64 `json:"w"`
	H    float64 `json:"h"`
}

type layoutOutput struct {
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
	Nodes  map[string]struct {
		X, Y, W, H float64
	} `json:"nodes"`
	Edges []struct {
		Points []struct{ X, Y float64 } `json:"points"`
		X      float64                  `json:"x"`
		Y      float64                  `json:"y"`
	} `json:"edges"`
}

// script lays the input out top to bottom; edges are named by their index so that parallel
// edges (a wait's next and its on_timeout to the same node) stay apart.
const script = `(function(input) {
	var g = new dagre.graphlib.Graph({multigraph: true});
	g.setGraph({rankdir: "TB", ranker: "network-simplex", nodesep: 28, ranksep: 44, edgesep: 14, marginx: 16, marginy: 16});
	g.setDefaultEdgeLabel(function() { return {}; });
	input.nodes.forEach(function(n) { g.setNode(n.id, {width: n.w, height: n.h}); });
	input.edges.forEach(function(e, i) {
		g.setEdge(e.from, e.to, {width: e.w, height: e.h, labelpos: "c"}, "e" + i);
	});
	dagre.layout(g);
	var out = {width: g.graph().width, height: g.graph().height, nodes: {}, edges: []};
	input.nodes.forEach(function(n) { var v = g.node(n.id); out.nodes[n.id] = {X: v.x, Y: v.y, W: v.width, H: v.height}; });
	input.edges.forEach(function(e, i) {
		var v = g.edge({v: e.from, w: e.to, name: "e" + i});
		out.edges.push({points: v.points.map(function(p) { return {X: p.x, Y: p.y}; }), x: v.x || 0, y: v.y || 0});
	});
	return JSON.stringify(out);
})`

// Layout is where f's nodes and edges go; the same flow (by hash) is laid out once.
func (e *Engine) Layout(f *engine.Flow) (*Layout, error) {
	if len(f.Nodes) > MaxNodes {
		return nil, fmt.Errorf("%w: %d nodes, at most %d are drawn", ErrTooLarge, len(f.Nodes), MaxNodes)
	}
	key := f.Hash
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.cache[key]; ok && key != "" {
		return l, nil
	}
	l, err := e.layout(f)
	if err != nil {
		return nil, err
	}
	if key != "" {
		if len(e.cache) >= maxCached {
			clear(e.cache)
		}
		e.cache[key] = l
	}
	return l, nil
}

// layout runs dagre on f (e.mu held).
func (e *Engine) layout(f *engine.Flow) (*Layout, error) {
	if e.vm == nil {
		vm := goja.New()
		vm.Set("window", vm.GlobalObject()) // the UMD bundle registers dagre on window
		if _, err := vm.RunString(dagreJS); err != nil {
			return nil, fmt.Errorf("graph: load dagre: %w", err)
		}
		e.vm = vm
	}
	in := layoutInput{}
	for _, n := range f.Nodes {
		w := 0.0
		lines := nodeLines(n)
		for _, s := range lines {
			w = max(w, textWidth(s))
		}
		in.Nodes = append(in.Nodes, layoutNode{ID: n.ID, W: w + 2*padX, H: float64(len(lines))*lineHeight + 2*padY})
	}
	edges := f.Edges()
	for _, ed := range edges {
		le := layoutEdge{From: ed.From, To: ed.To}
		if s := edgeLabel(ed); s != "" {
			le.W, le.H = textWidth(s)+8, lineHeight
		}
		in.Edges = append(in.Edges, le)
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	out, err := e.run(string(raw))
	if err != nil {
		return nil, err
	}
	l := &Layout{Width: out.Width, Height: out.Height, Nodes: map[string]Box{}}
	for id, b := range out.Nodes {
		l.Nodes[id] = Box{X: b.X, Y: b.Y, W: b.W, H: b.H}
	}
	if len(out.Edges) != len(edges) {
		return nil, fmt.Errorf("graph: dagre returned %d edges for %d", len(out.Edges), len(edges))
	}
	for i, ed := range edges {
		el := EdgeLayout{Edge: ed, LabelAt: [2]float64{out.Edges[i].X, out.Edges[i].Y}}
		for _, p := range out.Edges[i].Points {
			el.Points = append(el.Points, [2]float64{p.X, p.Y})
		}
		l.Edges = append(l.Edges, el)
	}
	return l, nil
}

// run calls the layout script on the input JSON, interrupted past layoutTimeout.
func (e *Engine) run(input string) (*layoutOutput, error) {
	fn, err := e.vm.RunString(script)
	if err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	call, ok := goja.AssertFunction(fn)
	if !ok {
		return nil, errors.New("graph: the layout script is no function")
	}
	timer := time.AfterFunc(layoutTimeout, func() { e.vm.Interrupt("layout timed out") })
	v, err := call(goja.Undefined(), e.vm.ToValue(mustParse(e.vm, input)))
	timer.Stop()
	e.vm.ClearInterrupt()
	if err != nil {
		return nil, fmt.Errorf("graph: dagre: %w", err)
	}
	var out layoutOutput
	if err := json.NewDecoder(strings.NewReader(v.String())).Decode(&out); err != nil {
		return nil, fmt.Errorf("graph: dagre's answer: %w", err)
	}
	return &out, nil
}

// mustParse is JSON.parse(input) in vm (the input is JSON we marshalled).
func mustParse(vm *goja.Runtime, input string) goja.Value {
	parse, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
	v, err := parse(goja.Undefined(), vm.ToValue(input))
	if err != nil {
		return goja.Null()
	}
	return v
}
