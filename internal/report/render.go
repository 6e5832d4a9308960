package report

import (
	"fmt"
	"io"
	"strings"
)

// Renderable is one command's output in every format: text and JSON of
// its own, and the Document the HTML and Markdown renderers draw.
type Renderable interface {
	Text(io.Writer) error
	JSON(io.Writer) error
	Document() *Document
}

// formats are the output formats, each with its renderer: the one table
// a new format is added to (its renderer, its test, the help text below
// is made from it).
var formats = []struct {
	name   string
	render func(io.Writer, Renderable) error
}{
	{"text", func(w io.Writer, r Renderable) error { return r.Text(w) }},
	{"json", func(w io.Writer, r Renderable) error { return r.JSON(w) }},
	{"html", func(w io.Writer, r Renderable) error { return HTML(w, r.Document()) }},
	{"markdown", func(w io.Writer, r Renderable) error { return Markdown(w, r.Document()) }},
}

// Formats names the output formats, in the order help lists them.
func Formats() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.name
	}
	return names
}

// CheckFormat refuses a format that is not one of Formats.
func CheckFormat(name string) error {
	for _, f := range formats {
		if f.name == name {
			return nil
		}
	}
	return fmt.Errorf("unknown --format %q: use %s", name, strings.Join(Formats(), ", "))
}

// Render writes r in the named format: the one format switch of every
// command.
func Render(w io.Writer, r Renderable, format string) error {
	for _, f := range formats {
		if f.name == format {
			return f.render(w, r)
		}
	}
	return CheckFormat(format)
}
