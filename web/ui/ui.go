package ui

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
)

//go:embed templates/*.html
var templates embed.FS

//go:embed static
var static embed.FS

// staticFiles is the files served under /ui/static/.
func staticFiles() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the directory is embedded: it exists
	}
	return sub
}

// parsePages parses every page: each is the layout with the page's own template ("content" and
// "title") and the shared partials. A page is executed by its file name ("flows.html"); a
// fragment (an htmx swap) by its template name within its page.
func parsePages(funcs template.FuncMap) (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templates, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return nil, fmt.Errorf("ui: layout: %w", err)
	}
	names, err := fs.Glob(templates, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := n[len("templates/"):]
		if name == "layout.html" || name == "partials.html" {
			continue
		}
		t, err := base.Clone()
		if err == nil {
			t, err = t.ParseFS(templates, n)
		}
		if err != nil {
			return nil, fmt.Errorf("ui: %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}
