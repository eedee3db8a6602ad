package graph

import (
	"bytes"
	"fmt"
	"html"
	"strconv"
	"strings"

	"plaita/engine"
)

// Colours of the picture. They are written into the SVG (not left to a stylesheet) so that the
// file `plaita flow graph` prints looks the same outside the console; the classes name the
// same states for the page's scripts and tests.
const (
	colNode        = "#ffffff"
	colStroke      = "#5f6b7a"
	colBranch      = "#efe9fb" // condition, switch: where the flow forks (violet: far from the current node's yellow)
	colWait        = "#eef4fb" // wait_event, delay, approval: where it can suspend
	colVisited     = "#e3f4e6"
	colVisitedLine = "#1e7b34"
	colCurrent     = "#fff1b8"
	colCurrentLine = "#a86500"
	colFailed      = "#fde2e1"
	colFailedLine  = "#b42318"
	colEdge        = "#8a94a3"
	colEdgeText    = "#4f5b6b" // a label's text: 7:1 on white, where the line's grey would be 3:1
	colTaken       = "#1e7b34"
	colText        = "#1d2430"
)

// SVG draws f, with o's marks when o is not nil. The same flow and overlay give the same bytes.
func (e *Engine) SVG(f *engine.Flow, o *Overlay) ([]byte, error) {
	l, err := e.Layout(f)
	if err != nil {
		return nil, err
	}
	if o == nil {
		o = &Overlay{}
	}
	var b bytes.Buffer
	w, h := num(l.Width), num(l.Height)
	// A picture is an image to assistive technology; one whose nodes are links is a group of
	// them (an image may hold nothing one can operate).
	role := "img"
	if o.Link != nil {
		role = "group"
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="flow-graph" viewBox="0 0 %s %s" width="%s" height="%s" role="%s" aria-labelledby="flow-graph-title" font-family="ui-monospace, Menlo, Consolas, monospace" font-size="%d">`+"\n",
		w, h, w, h, role, fontSize)
	fmt.Fprintf(&b, `<title id="flow-graph-title">%s</title>`+"\n", esc(title(f, o)))
	b.WriteString(`<defs>` +
		`<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="` + colEdge + `"/></marker>` +
		`<marker id="arrow-taken" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="` + colTaken + `"/></marker>` +
		"</defs>\n")
	b.WriteString(`<g class="edges">` + "\n")
	for i, ed := range l.Edges {
		writeEdge(&b, ed, o.Taken[i], o.EdgeRuns[i])
	}
	b.WriteString("</g>\n" + `<g class="nodes">` + "\n")
	for _, n := range f.Nodes {
		writeNode(&b, n, l.Nodes[n.ID], o)
	}
	b.WriteString("</g>\n</svg>\n")
	return b.Bytes(), nil
}

func title(f *engine.Flow, o *Overlay) string {
	s := fmt.Sprintf("Flow %s: %d nodes, %d edges", f.ID, len(f.Nodes), len(f.Edges()))
	if len(o.Visited) > 0 {
		s += fmt.Sprintf("; %d visited", len(o.Visited))
	}
	if o.Current != "" {
		s += "; now at " + o.Current
	}
	if o.Failed != "" {
		s += "; failed at " + o.Failed
	}
	return s
}

func writeEdge(b *bytes.Buffer, ed EdgeLayout, taken bool, runs int) {
	class, stroke, text, marker, width := "edge", colEdge, colEdgeText, "arrow", "1.3"
	if taken {
		class, stroke, text, marker, width = "edge taken", colTaken, colTaken, "arrow-taken", "2.6"
	}
	fmt.Fprintf(b, `<g class="%s" data-from="%s" data-to="%s" data-label="%s" data-runs="%d">`, class, esc(ed.From), esc(ed.To), esc(ed.Label), runs)
	fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="%s" marker-end="url(#%s)"/>`, pathData(ed.Points), stroke, width, marker)
	s := edgeLabel(ed.Edge)
	if runs > 0 {
		s = strings.TrimSpace(s + " ×" + strconv.Itoa(runs))
	}
	if s != "" {
		lw := textWidth(s) + 8
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%d" rx="3" fill="#ffffff" fill-opacity="0.9"/>`,
			num(ed.LabelAt[0]-lw/2), num(ed.LabelAt[1]-lineHeight/2), num(lw), lineHeight)
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" dominant-baseline="central" fill="%s">%s</text>`,
			num(ed.LabelAt[0]), num(ed.LabelAt[1]), text, esc(s))
	}
	b.WriteString("</g>\n")
}

// pathData is a route through dagre's points: straight to the first midpoint, then quadratic
// curves through each point, so bends are smooth and the route stays dagre's.
func pathData(pts [][2]float64) string {
	if len(pts) == 0 {
		return ""
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "M%s,%s", num(pts[0][0]), num(pts[0][1]))
	if len(pts) == 2 {
		fmt.Fprintf(&b, "L%s,%s", num(pts[1][0]), num(pts[1][1]))
		return b.String()
	}
	for i := 1; i < len(pts)-1; i++ {
		mx, my := (pts[i][0]+pts[i+1][0])/2, (pts[i][1]+pts[i+1][1])/2
		if i == len(pts)-2 {
			mx, my = pts[i+1][0], pts[i+1][1]
		}
		fmt.Fprintf(&b, "Q%s,%s %s,%s", num(pts[i][0]), num(pts[i][1]), num(mx), num(my))
	}
	return b.String()
}

func writeNode(b *bytes.Buffer, n *engine.Node, box Box, o *Overlay) {
	class, fill, stroke, width := "node", colNode, colStroke, "1.2"
	switch n.Type {
	case "condition", "switch":
		fill = colBranch
	case "wait_event", "delay", "approval":
		fill = colWait
	}
	if o.Visited[n.ID] {
		class, fill, stroke, width = class+" visited", colVisited, colVisitedLine, "2"
	}
	switch n.ID {
	case o.Failed:
		class, fill, stroke, width = class+" failed", colFailed, colFailedLine, "3"
	case o.Current:
		class, fill, stroke, width = class+" current", colCurrent, colCurrentLine, "3"
	}
	x, y := box.X-box.W/2, box.Y-box.H/2
	link := ""
	if o != nil && o.Link != nil {
		link = o.Link(n.ID)
	}
	if link != "" {
		fmt.Fprintf(b, `<a href="%s">`, esc(link)) // named by its text: the node's id and type
	}
	fmt.Fprintf(b, `<g class="%s" id="node-%s" data-node="%s" data-type="%s">`, class, esc(n.ID), esc(n.ID), esc(n.Type))
	fmt.Fprintf(b, `<title>%s</title>`, esc(nodeTitle(n, o)))
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" rx="6" fill="%s" stroke="%s" stroke-width="%s"/>`,
		num(x), num(y), num(box.W), num(box.H), fill, stroke, width)
	lines := nodeLines(n)
	for i, s := range lines {
		weight := ""
		if i == 0 {
			weight = ` font-weight="bold"`
		}
		ty := y + padY + float64(i)*lineHeight + lineHeight/2
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" dominant-baseline="central" fill="%s"%s>%s</text>`,
			num(box.X), num(ty), colText, weight, esc(s))
	}
	// A node that ran more than once wears its count on its corner (the box is sized for its
	// own lines).
	if t := o.Timings[n.ID]; t != nil && t.Runs > 1 {
		c := "×" + strconv.Itoa(t.Runs)
		cw := textWidth(c) + 8
		fmt.Fprintf(b, `<g class="runs" data-runs="%d"><rect x="%s" y="%s" width="%s" height="%d" rx="8" fill="%s"/><text x="%s" y="%s" text-anchor="middle" dominant-baseline="central" fill="#ffffff">%s</text></g>`,
			t.Runs, num(x+box.W-cw/2), num(y-lineHeight/2), num(cw), lineHeight, colTaken, num(x+box.W), num(y), esc(c))
	}
	b.WriteString("</g>")
	if link != "" {
		b.WriteString("</a>")
	}
	b.WriteString("\n")
}

// nodeTitle is a node's tooltip: its type, and what the overlay knows of its runs.
func nodeTitle(n *engine.Node, o *Overlay) string {
	s := n.ID + " (" + n.Type + ")"
	if t := o.Timings[n.ID]; t != nil {
		s += fmt.Sprintf(": %d run(s), %d ms", t.Runs, t.TotalMillis)
	}
	switch n.ID {
	case o.Failed:
		s += " — failed here"
	case o.Current:
		s += " — current node"
	}
	return s
}

// num writes a coordinate with at most two decimals, the same way everywhere.
func num(f float64) string {
	return strconv.FormatFloat(float64(int64(f*100+0.5*sign(f)))/100, 'f', -1, 64)
}

func sign(f float64) float64 {
	if f < 0 {
		return -1
	}
	return 1
}

func esc(s string) string { return html.EscapeString(s) }
