package karpentermetrics_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/karpx/karpx/autoscaler/karpentermetrics"
	// Every package of the controller registers its metrics at init.
	_ "github.com/karpx/karpx/autoscaler/operator"
)

// upstreamMetricModules are the modules whose metric families
// docs/metrics.md inventories: Karpenter v1.14's core and AWS provider.
var upstreamMetricModules = []struct{ path, version string }{
	{"sigs.k8s.io/karpenter", "v1.14.0"},
	{"github.com/aws/karpenter-provider-aws", "v1.14.0"},
}

// family is one Prometheus metric family as an upstream Go file defines
// it or docs/metrics.md's inventory lists it.
type family struct {
	name, typ string
	// labels are the label names in order; "…" stands for names computed
	// at run time (e.g. one per well-known node label).
	labels []string
	// source is the defining file, module-relative (upstream only).
	source string
	// exported is the inventory's karpx column beginning "exported";
	// registered is exported, or the column beginning "registered" (a
	// collector karpx registers but never records; docs only).
	exported, registered bool
}

// TestEveryKarpenterMetricFamilyListed parses every non-test Go file of
// Karpenter v1.14.0's core and AWS provider (pkg/, from the module cache)
// for metric families (prometheus.{Counter,Gauge,Histogram,Summary}Opts
// literals: namespace, subsystem, name, and the label names passed with
// them) and compares them with the inventory table of docs/metrics.md:
// every family listed once with Karpenter's type and label names, none
// listed that Karpenter does not have. Every family the table marks
// exported must be registered on controller-runtime's registry by
// karpx's controller (or described by the state collector), and every
// karpenter_* family karpx registers must be marked exported.
func TestEveryKarpenterMetricFamilyListed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mods []module
	for _, m := range upstreamMetricModules {
		dir, err := moduleDir(ctx, m.path, m.version)
		if err != nil {
			t.Skipf("module %s@%s not available: %v", m.path, m.version, err)
		}
		mods = append(mods, module{dir: dir, path: m.path, version: m.version})
	}
	fams, err := parseFamilies(mods)
	if err != nil {
		t.Fatal(err)
	}
	upstream := map[string]family{}
	for _, f := range fams {
		if prev, ok := upstream[f.name]; ok {
			t.Fatalf("%s defined twice: %s, %s", f.name, prev.source, f.source)
		}
		upstream[f.name] = f
	}
	if len(upstream) < 50 {
		t.Fatalf("parsed only %d families from upstream; the parser no longer understands Karpenter's definitions", len(upstream))
	}
	docs, err := inventory(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	exportedByKarpx := registeredKarpenterFamilies(t, upstream)
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(upstream)) {
		up := upstream[name]
		doc, ok := docs[name]
		if !ok {
			missing = append(missing, fmt.Sprintf("| `%s` | %s | %s | ... |  (%s)", name, up.typ, labelCell(up.labels), up.source))
			continue
		}
		if doc.typ != up.typ || !slices.Equal(doc.labels, up.labels) {
			t.Errorf("docs/metrics.md lists %s as %s {%s}; Karpenter v1.14 defines %s {%s} (%s)",
				name, doc.typ, strings.Join(doc.labels, ","), up.typ, strings.Join(up.labels, ","), up.source)
		}
		if doc.registered && !exportedByKarpx[name] {
			t.Errorf("docs/metrics.md says karpx registers %s, but no karpx collector does", name)
		}
		if !doc.registered && exportedByKarpx[name] {
			t.Errorf("karpx registers %s, but docs/metrics.md marks it neither exported nor registered", name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/metrics.md's inventory lacks %d Karpenter v1.14 families; add rows:\n%s", len(missing), strings.Join(missing, "\n"))
	}
	for name := range docs {
		if _, ok := upstream[name]; !ok {
			t.Errorf("docs/metrics.md's inventory lists %s, which Karpenter v1.14 does not define", name)
		}
	}
	n := 0
	for _, d := range docs {
		if d.exported {
			n++
		}
	}
	t.Logf("Karpenter v1.14: %d metric families; karpx exports %d", len(upstream), n)
}

// registeredKarpenterFamilies reports which of names karpx's controller
// registers on controller-runtime's registry (a probe collector of the
// same name with other help text is refused by the registry exactly when
// one is registered) or its state collector describes.
func registeredKarpenterFamilies(t *testing.T, names map[string]family) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	ch := make(chan *prometheus.Desc, 64)
	go func() { (&karpentermetrics.StateCollector{}).Describe(ch); close(ch) }()
	for d := range ch {
		s := d.String()
		if i := strings.Index(s, `fqName: "`); i >= 0 {
			rest := s[i+len(`fqName: "`):]
			out[rest[:strings.IndexByte(rest, '"')]] = true
		}
	}
	for name := range names {
		probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe of TestEveryKarpenterMetricFamilyListed"})
		err := crmetrics.Registry.Register(probe)
		if err == nil {
			crmetrics.Registry.Unregister(probe)
			continue
		}
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) || strings.Contains(err.Error(), "same fully-qualified name") {
			out[name] = true
		}
	}
	return out
}

// moduleDir is the module cache directory of path@version (`go mod
// download -json`).
func moduleDir(ctx context.Context, path, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", path, version, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", err
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", path, version, info.Error)
	}
	return info.Dir, nil
}

// optsTypes maps client_golang's option types to the family type.
var optsTypes = map[string]string{"CounterOpts": "counter", "GaugeOpts": "gauge", "HistogramOpts": "histogram", "SummaryOpts": "summary"}

// pkgFiles are one Go package's parsed files.
type pkgFiles struct {
	files []*ast.File
	paths []string
}

// module is a module's root directory in the module cache.
type module struct{ dir, path, version string }

// parseFamilies returns the metric families defined under pkg/ of mods,
// skipping tests and test helpers; constants resolve across all of them
// (the AWS provider names its families with the core's Namespace).
func parseFamilies(mods []module) ([]family, error) {
	fset := token.NewFileSet()
	pkgs := map[string]*pkgFiles{} // import path → files
	for _, m := range mods {
		err := filepath.WalkDir(filepath.Join(m.dir, "pkg"), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); n == "test" || n == "fake" || n == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(m.dir, filepath.Dir(path))
			imp := m.path + "/" + filepath.ToSlash(rel)
			if pkgs[imp] == nil {
				pkgs[imp] = &pkgFiles{}
			}
			pkgs[imp].files = append(pkgs[imp].files, f)
			r, _ := filepath.Rel(m.dir, path)
			pkgs[imp].paths = append(pkgs[imp].paths, m.path+"@"+m.version+" "+filepath.ToSlash(r))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	ev := &evaluator{consts: map[string]ast.Expr{}, funcs: map[string]*ast.FuncDecl{}, home: map[ast.Node]scope{}}
	for imp, p := range pkgs {
		for _, f := range p.files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.GenDecl:
					if d.Tok != token.CONST {
						continue
					}
					for _, spec := range d.Specs {
						vs := spec.(*ast.ValueSpec)
						for i, n := range vs.Names {
							if i < len(vs.Values) {
								ev.consts[imp+"."+n.Name] = vs.Values[i]
								ev.home[vs.Values[i]] = ev.homeOf(imp, f)
							}
						}
					}
				case *ast.FuncDecl:
					if d.Recv == nil {
						ev.funcs[imp+"."+d.Name.Name] = d
					}
				}
			}
		}
	}
	var out []family
	for imp, p := range pkgs {
		for i, f := range p.files {
			sc := ev.homeOf(imp, f)
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				for ai, arg := range call.Args {
					lit, ok := arg.(*ast.CompositeLit)
					if !ok {
						continue
					}
					sel, ok := lit.Type.(*ast.SelectorExpr)
					if !ok || optsTypes[sel.Sel.Name] == "" {
						continue
					}
					fam := family{typ: optsTypes[sel.Sel.Name], source: p.paths[i], labels: []string{}}
					var parts []string
					for _, field := range []string{"Namespace", "Subsystem", "Name"} {
						for _, el := range lit.Elts {
							kv := el.(*ast.KeyValueExpr)
							if kv.Key.(*ast.Ident).Name == field {
								s, ok := ev.str(sc, kv.Value)
								if !ok {
									s = "?"
								}
								if s != "" {
									parts = append(parts, s)
								}
							}
						}
					}
					fam.name = strings.Join(parts, "_")
					if ai+1 < len(call.Args) {
						fam.labels = ev.strs(sc, call.Args[ai+1], 0)
					}
					out = append(out, fam)
				}
				return true
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// scope is where an expression is evaluated: its package's import path
// and its file's imports (name → path).
type scope struct {
	pkg     string
	imports map[string]string
}

// evaluator resolves string and []string expressions of the parsed
// packages: literals, constants (of any parsed package), concatenation,
// []string literals, append, and calls of functions whose body is one
// return statement; anything else is "…".
type evaluator struct {
	consts map[string]ast.Expr
	funcs  map[string]*ast.FuncDecl
	home   map[ast.Node]scope
}

func (ev *evaluator) homeOf(pkg string, f *ast.File) scope {
	if ev.home == nil {
		ev.home = map[ast.Node]scope{}
	}
	sc := scope{pkg: pkg, imports: map[string]string{}}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		sc.imports[name] = p
	}
	return sc
}

// ref resolves an identifier or pkg.Ident to its qualified name.
func (ev *evaluator) ref(sc scope, e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return sc.pkg + "." + x.Name
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return sc.imports[id.Name] + "." + x.Sel.Name
		}
	}
	return ""
}

func (ev *evaluator) str(sc scope, e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind == token.STRING {
			s, err := strconv.Unquote(x.Value)
			return s, err == nil
		}
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			a, ok1 := ev.str(sc, x.X)
			b, ok2 := ev.str(sc, x.Y)
			return a + b, ok1 && ok2
		}
	case *ast.Ident, *ast.SelectorExpr:
		if v, ok := ev.consts[ev.ref(sc, x)]; ok {
			return ev.str(ev.home[v], v)
		}
	}
	return "", false
}

func (ev *evaluator) strs(sc scope, e ast.Expr, depth int) []string {
	if depth > 8 {
		return []string{"…"}
	}
	switch x := e.(type) {
	case *ast.CompositeLit:
		out := []string{}
		for _, el := range x.Elts {
			out = append(out, ev.elem(sc, el))
		}
		return out
	case *ast.CallExpr:
		if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "append" && len(x.Args) > 0 {
			out := ev.strs(sc, x.Args[0], depth+1)
			for _, a := range x.Args[1:] {
				out = append(out, ev.elem(sc, a))
			}
			return out
		}
		if fd, ok := ev.funcs[ev.ref(sc, x.Fun)]; ok && len(x.Args) == 0 && fd.Body != nil && len(fd.Body.List) == 1 {
			if ret, ok := fd.Body.List[0].(*ast.ReturnStmt); ok && len(ret.Results) == 1 {
				fsc := sc
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
					fsc = scope{pkg: sc.imports[sel.X.(*ast.Ident).Name], imports: sc.imports}
				}
				return ev.strs(fsc, ret.Results[0], depth+1)
			}
		}
	}
	return []string{"…"}
}

func (ev *evaluator) elem(sc scope, e ast.Expr) string {
	if s, ok := ev.str(sc, e); ok {
		return s
	}
	return "…"
}

// labelCell renders label names as the inventory writes them.
func labelCell(labels []string) string {
	if len(labels) == 0 {
		return "none"
	}
	cells := make([]string, len(labels))
	for i, l := range labels {
		cells[i] = "`" + l + "`"
	}
	return strings.Join(cells, ", ")
}

// inventoryHeading starts the section of docs/metrics.md whose table
// TestEveryKarpenterMetricFamilyListed reads.
const inventoryHeading = "## Every Karpenter v1.14 metric family"

// inventory reads the table under inventoryHeading: | `name` | type |
// labels (backquoted names, or "none") | karpx (starting "exported", or why
// not; or "registered" for a collector registered but never recorded) |.
func inventory(path string) (map[string]family, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]family{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == inventoryHeading
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 4 {
			return nil, fmt.Errorf("%s: inventory row %q has %d cells, want 4 (metric, type, labels, karpx)", path, line, len(cells))
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		labels := []string{}
		for _, l := range strings.Split(strings.TrimSpace(cells[2]), ", ") {
			if l != "none" {
				labels = append(labels, strings.Trim(l, "`"))
			}
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: %s listed twice", path, name)
		}
		out[name] = family{name: name, typ: strings.TrimSpace(cells[1]), labels: labels,
			exported:   strings.HasPrefix(strings.TrimSpace(cells[3]), "exported"),
			registered: strings.HasPrefix(strings.TrimSpace(cells[3]), "exported") || strings.HasPrefix(strings.TrimSpace(cells[3]), "registered")}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no table under %q", path, inventoryHeading)
	}
	return out, sc.Err()
}
