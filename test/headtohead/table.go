package headtohead

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Figure is one measured figure of one side.
type Figure struct {
	// Name says what was measured ("burst: pending → Running p99").
	Name string
	// Unit is "s", "$/h", "MiB", "pods" or "" for a count or ratio.
	Unit string
	// Value is the figure; NaN when there was nothing to measure.
	Value float64
	// Note qualifies the value ("12 evicted, 4 removed", "NOT DONE …").
	Note string
}

// Results are the figures of one side's run.
type Results struct {
	// Side is the autoscaler's name.
	Side string
	// LoadAverage is /proc/loadavg's 1, 5 and 15 minute averages when the
	// run started.
	LoadAverage string
	// Figures are in the order measured.
	Figures []Figure
}

func (r *Results) add(name, unit string, value float64, note string) {
	r.Figures = append(r.Figures, Figure{Name: name, Unit: unit, Value: value, Note: note})
}

func (r *Results) find(name string) (Figure, bool) {
	if r == nil {
		return Figure{}, false
	}
	for _, f := range r.Figures {
		if f.Name == name {
			return f, true
		}
	}
	return Figure{}, false
}

// format renders a value with its unit: two decimals for seconds, three
// for dollars, none for counts.
func format(f Figure) string {
	if math.IsNaN(f.Value) {
		return "-"
	}
	var s string
	switch f.Unit {
	case "s":
		s = fmt.Sprintf("%.2f s", f.Value)
	case "$/h":
		s = fmt.Sprintf("$%.3f/h", f.Value)
	case "MiB":
		s = fmt.Sprintf("%.0f MiB", f.Value)
	default:
		if f.Value == math.Trunc(f.Value) {
			s = fmt.Sprintf("%.0f", f.Value)
		} else {
			s = fmt.Sprintf("%.2f", f.Value)
		}
		if f.Unit != "" {
			s += " " + f.Unit
		}
	}
	if f.Note != "" {
		s += " (" + f.Note + ")"
	}
	return s
}

// ratio returns a/b as "0.52x", or "-" when either is missing or b is 0.
func ratio(a, b Figure, okA, okB bool) string {
	if !okA || !okB || math.IsNaN(a.Value) || math.IsNaN(b.Value) {
		return "-"
	}
	if b.Value == 0 {
		if a.Value == 0 {
			return "1.00x"
		}
		return "-"
	}
	return fmt.Sprintf("%.2fx", a.Value/b.Value)
}

// WriteTable writes one Markdown table: a row per figure (in the order
// either side measured them), the karpx and Karpenter values and their
// ratio (karpx / Karpenter; below 1 means karpx has less of it). Either
// side may be nil (not run): its column shows "-".
func WriteTable(w io.Writer, karpx, karpenter *Results) error {
	var names []string
	seen := map[string]bool{}
	for _, r := range []*Results{karpx, karpenter} {
		if r == nil {
			continue
		}
		for _, f := range r.Figures {
			if !seen[f.Name] {
				seen[f.Name] = true
				names = append(names, f.Name)
			}
		}
	}
	var b strings.Builder
	b.WriteString("| figure | karpx | Karpenter | ratio |\n|---|---|---|---|\n")
	for _, name := range names {
		a, okA := karpx.find(name)
		k, okK := karpenter.find(name)
		cell := func(f Figure, ok bool) string {
			if !ok {
				return "-"
			}
			return format(f)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, cell(a, okA), cell(k, okK), ratio(a, k, okA, okK))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
