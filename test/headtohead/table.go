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
// the columns measured them), a column per side named in columns (the
// first is the base, karpx), each side's value from results (keyed by
// Results.Side; a side missing from results, not run, shows "-"), then
// for every other side the ratio base / side (below 1 means the base has
// less of it). It returns w's write error, or an error when columns is
// empty.
func WriteTable(w io.Writer, columns []string, results map[string]*Results) error {
	if len(columns) == 0 {
		return fmt.Errorf("WriteTable: no columns: name at least the base side")
	}
	var names []string
	seen := map[string]bool{}
	for _, c := range columns {
		r := results[c]
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
	b.WriteString("| figure |")
	for _, c := range columns {
		b.WriteString(" " + c + " |")
	}
	for _, c := range columns[1:] {
		b.WriteString(" " + columns[0] + " / " + c + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", 2*len(columns)-1) + "\n")
	for _, name := range names {
		base, okBase := results[columns[0]].find(name)
		fmt.Fprintf(&b, "| %s |", name)
		for _, c := range columns {
			f, ok := results[c].find(name)
			cell := "-"
			if ok {
				cell = format(f)
			}
			b.WriteString(" " + cell + " |")
		}
		for _, c := range columns[1:] {
			f, ok := results[c].find(name)
			b.WriteString(" " + ratio(base, f, okBase, ok) + " |")
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// addEC2Calls adds the burst's EC2 figures from calls: requests per pod
// (with the four most called actions), CreateFleet calls (with the
// NodeClaims launched per call) and throttled answers (with the four most
// throttled actions). launched is the
// number of NodeClaims the burst launched, pods the number of its pods.
func addEC2Calls(res *Results, calls EC2Calls, launched int, pods float64) {
	res.add("burst: EC2 requests per pod", "", float64(calls.Total)/pods, topRequests(calls.ByAction, 4))
	fleets := calls.ByAction["CreateFleet"]
	note := ""
	if fleets > 0 {
		note = fmt.Sprintf("%.2f NodeClaims per call", float64(launched)/float64(fleets))
	}
	res.add("burst: EC2 CreateFleet calls", "", float64(fleets), note)
	res.add("burst: EC2 throttled answers", "", float64(calls.Throttled), topRequests(calls.ThrottledByAction, 4))
}
