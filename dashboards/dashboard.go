package dashboards

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
)

//go:embed karpx.json
var karpxJSON []byte

// Karpx returns the JSON of dashboards/karpx.json, the karpx dashboard.
func Karpx() []byte { return append([]byte(nil), karpxJSON...) }

// DatasourceVariable is the name of the datasource template variable
// every panel and target of a karpx dashboard must use ("${datasource}"),
// so that the importer picks the Prometheus that scrapes karpx.
const DatasourceVariable = "datasource"

// MinSchemaVersion is the oldest Grafana dashboard schemaVersion accepted:
// 36 is the first with per-panel datasource references ({type, uid}),
// Grafana 9.0.
const MinSchemaVersion = 36

// Dashboard is the part of Grafana's dashboard JSON model that Validate
// checks; other fields are kept in the file, not here.
type Dashboard struct {
	// UID is the dashboard's stable identifier (URLs, provisioning).
	UID string `json:"uid"`
	// Title is shown in Grafana's dashboard list.
	Title string `json:"title"`
	// SchemaVersion is Grafana's JSON model version.
	SchemaVersion int `json:"schemaVersion"`
	// Panels are the top-level panels, rows included, in file order.
	Panels []Panel `json:"panels"`
	// Templating holds the template variables.
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Variable is a template variable.
type Variable struct {
	// Name is what panels reference as ${Name}.
	Name string `json:"name"`
	// Type is "datasource", "query", "custom", ...
	Type string `json:"type"`
	// Query is, for a datasource variable, the datasource plugin type.
	Query any `json:"query"`
}

// Panel is one panel; a row ("type": "row") groups the panels after it
// and, when collapsed, holds them in Panels.
type Panel struct {
	// ID is unique in the dashboard.
	ID int `json:"id"`
	// Type is the visualisation: "timeseries", "stat", "row", ...
	Type string `json:"type"`
	// Title is shown above the panel.
	Title string `json:"title"`
	// Datasource is the panel's datasource reference.
	Datasource *Datasource `json:"datasource"`
	// Targets are the panel's queries.
	Targets []Target `json:"targets"`
	// GridPos places the panel on Grafana's 24-column grid.
	GridPos GridPos `json:"gridPos"`
	// Panels are a collapsed row's panels.
	Panels []Panel `json:"panels"`
}

// Datasource is a datasource reference: plugin type and uid (here
// "${datasource}").
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Target is one query of a panel.
type Target struct {
	// RefID names the query in its panel ("A", "B", ...).
	RefID string `json:"refId"`
	// Datasource is the query's datasource reference.
	Datasource *Datasource `json:"datasource"`
	// Expr is the PromQL expression.
	Expr string `json:"expr"`
}

// GridPos is a panel's position and size in grid units (24 columns wide).
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Query is one target's expression with the panel it belongs to.
type Query struct {
	// PanelID and PanelTitle name the panel.
	PanelID    int
	PanelTitle string
	// RefID names the target in the panel.
	RefID string
	// Expr is the PromQL expression.
	Expr string
}

// Parse decodes a dashboard's JSON model. It returns an error for JSON
// that is not an object of Grafana's shape (wrong field types); Validate
// checks the content.
func Parse(data []byte) (*Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("dashboard JSON: %w", err)
	}
	return &d, nil
}

// All returns every panel, the panels of collapsed rows included, rows
// included, in file order.
func (d *Dashboard) All() []Panel {
	var out []Panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// Queries returns the expression of every target of every panel.
func (d *Dashboard) Queries() []Query {
	var out []Query
	for _, p := range d.All() {
		for _, t := range p.Targets {
			out = append(out, Query{PanelID: p.ID, PanelTitle: p.Title, RefID: t.RefID, Expr: t.Expr})
		}
	}
	return out
}

// Validate checks what Grafana needs to import the dashboard and show
// every panel against the chosen Prometheus: uid, title and a
// schemaVersion of at least MinSchemaVersion; a template variable named
// DatasourceVariable of type datasource for prometheus; unique panel ids;
// on every panel but rows a Prometheus datasource of uid
// "${datasource}", a place inside the 24-column grid and at least one
// target; on every target a unique refId, the same datasource and a
// PromQL expression that MetricNames accepts and that selects at least one
// metric. It returns every problem found, each naming the panel and the
// field to fix.
func (d *Dashboard) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if d.UID == "" {
		bad("uid is empty: set a stable uid")
	}
	if d.Title == "" {
		bad("title is empty")
	}
	if d.SchemaVersion < MinSchemaVersion {
		bad("schemaVersion %d: want at least %d (per-panel datasource references)", d.SchemaVersion, MinSchemaVersion)
	}
	hasVar := false
	for _, v := range d.Templating.List {
		if v.Name == DatasourceVariable && v.Type == "datasource" && v.Query == "prometheus" {
			hasVar = true
		}
	}
	if !hasVar {
		bad("templating.list has no variable %q of type datasource with query prometheus", DatasourceVariable)
	}
	want := Datasource{Type: "prometheus", UID: "${" + DatasourceVariable + "}"}
	ids := map[int]string{}
	for _, p := range d.All() {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID <= 0 {
			bad("%s: id must be a positive integer", where)
		} else if other, dup := ids[p.ID]; dup {
			bad("%s: id %d is also panel %q's: ids must be unique", where, p.ID, other)
		}
		ids[p.ID] = p.Title
		if p.Title == "" {
			bad("%s: title is empty", where)
		}
		if p.GridPos.W < 1 || p.GridPos.H < 1 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.Y < 0 {
			bad("%s: gridPos %+v is outside the 24-column grid", where, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || *p.Datasource != want {
			bad("%s: datasource %v, want %+v", where, p.Datasource, want)
		}
		if len(p.Targets) == 0 {
			bad("%s: no targets", where)
		}
		refs := map[string]bool{}
		for _, t := range p.Targets {
			if t.RefID == "" || refs[t.RefID] {
				bad("%s: target refId %q is empty or repeated", where, t.RefID)
			}
			refs[t.RefID] = true
			if t.Datasource == nil || *t.Datasource != want {
				bad("%s target %s: datasource %v, want %+v", where, t.RefID, t.Datasource, want)
			}
			names, err := MetricNames(t.Expr)
			switch {
			case err != nil:
				bad("%s target %s: %w", where, t.RefID, err)
			case len(names) == 0:
				bad("%s target %s: expr %q selects no metric", where, t.RefID, t.Expr)
			}
		}
	}
	return errors.Join(errs...)
}
