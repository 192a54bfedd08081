package lint

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/karpx/karpx/manifests/crds"
)

// The packages whose code counts as implementing a field: karpx's
// production code (tests excluded). lint/ is not among them: a rule that
// reads a field checks it, it does not implement it.
var productionPatterns = []string{"./autoscaler/...", "./webhook/...", "./plugin/...", "./cmd/..."}

// apiTypes maps each CRD kind to the Go type its objects decode into in
// production code.
var apiTypes = map[string][2]string{
	"EC2NodeClass": {"github.com/karpx/karpx/apis/v1", "EC2NodeClass"},
	"NodePool":     {"sigs.k8s.io/karpenter/pkg/apis/v1", "NodePool"},
	"NodeClaim":    {"sigs.k8s.io/karpenter/pkg/apis/v1", "NodeClaim"},
	"NodeOverlay":  {"sigs.k8s.io/karpenter/pkg/apis/v1alpha1", "NodeOverlay"},
}

// fieldKey names a struct field across type-checked packages: its
// declaring package and its declaration's position.
func fieldKey(fset *token.FileSet, v *types.Var) string {
	v = v.Origin()
	return v.Pkg().Path() + "@" + fset.Position(v.Pos()).String() + "#" + v.Name()
}

// funcKey names a function or method across type-checked packages.
func funcKey(fset *token.FileSet, f *types.Func) string {
	f = f.Origin()
	pkg := ""
	if f.Pkg() != nil {
		pkg = f.Pkg().Path()
	}
	return pkg + "@" + fset.Position(f.Pos()).String() + "#" + f.Name()
}

// uses is what one body of code does with struct fields and functions.
type uses struct {
	read, written, calls map[string]bool
}

func newUses() *uses {
	return &uses{read: map[string]bool{}, written: map[string]bool{}, calls: map[string]bool{}}
}

// inspect records in u the fields n reads (a selector x.F, except as the
// target of an assignment, and the embedded fields a promoted selector
// crosses), writes (assignment targets, struct literal keys) and the
// functions and methods it refers to.
func (u *uses) inspect(p *packages.Package, n ast.Node) {
	lhs := map[*ast.SelectorExpr]bool{}
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, e := range n.Lhs {
				if s, ok := ast.Unparen(e).(*ast.SelectorExpr); ok {
					lhs[s] = true
				}
			}
		case *ast.Ident:
			if f, ok := p.TypesInfo.Uses[n].(*types.Func); ok {
				u.calls[funcKey(p.Fset, f)] = true
			}
		case *ast.SelectorExpr:
			sel, ok := p.TypesInfo.Selections[n]
			if !ok {
				return true
			}
			typ := sel.Recv()
			for _, i := range sel.Index()[:len(sel.Index())-1] {
				st, ok := derefStruct(typ)
				if !ok {
					break
				}
				u.read[fieldKey(p.Fset, st.Field(i))] = true
				typ = st.Field(i).Type()
			}
			switch obj := sel.Obj().(type) {
			case *types.Func:
				u.calls[funcKey(p.Fset, obj)] = true
			case *types.Var:
				if lhs[n] {
					u.written[fieldKey(p.Fset, obj)] = true
				} else {
					u.read[fieldKey(p.Fset, obj)] = true
				}
			}
		case *ast.CompositeLit:
			st, ok := derefStruct(p.TypesInfo.TypeOf(n))
			if !ok {
				return true
			}
			for _, e := range n.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				id, ok := kv.Key.(*ast.Ident)
				if !ok {
					continue
				}
				for i := range st.NumFields() {
					if st.Field(i).Name() == id.Name {
						u.written[fieldKey(p.Fset, st.Field(i))] = true
					}
				}
			}
		}
		return true
	})
}

// fieldUses returns the key of every struct field that production code
// reads (prod: a selector x.F that is not an assignment target, directly
// or inside a function or method of the API packages (api) that
// production code calls, transitively) and of every field it only writes
// (assignment targets and struct literal keys).
func fieldUses(t *testing.T, prod, api []*packages.Package) (read, written map[string]bool) {
	for _, p := range append(append([]*packages.Package{}, prod...), api...) {
		if len(p.Errors) > 0 {
			t.Fatalf("loading %s: %v", p.PkgPath, p.Errors)
		}
	}
	top := newUses()
	for _, p := range prod {
		for _, f := range p.Syntax {
			top.inspect(p, f)
		}
	}
	bodies := map[string]*uses{}
	for _, p := range api {
		for _, f := range p.Syntax {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				fn, ok := p.TypesInfo.Defs[fd.Name].(*types.Func)
				if !ok || strings.HasPrefix(fn.Name(), "DeepCopy") {
					// Generated deep copies read every field without
					// acting on any.
					continue
				}
				u := newUses()
				u.inspect(p, fd.Body)
				bodies[funcKey(p.Fset, fn)] = u
			}
		}
	}
	// Follow the calls from production code into the API packages.
	queue := make([]string, 0, len(top.calls))
	for k := range top.calls {
		queue = append(queue, k)
	}
	done := map[string]bool{}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		if done[k] {
			continue
		}
		done[k] = true
		b, ok := bodies[k]
		if !ok {
			continue
		}
		for f := range b.read {
			top.read[f] = true
		}
		for f := range b.written {
			top.written[f] = true
		}
		for c := range b.calls {
			queue = append(queue, c)
		}
	}
	return top.read, top.written
}

func derefStruct(t types.Type) (*types.Struct, bool) {
	for {
		switch u := t.(type) {
		case *types.Pointer:
			t = u.Elem()
		case *types.Named, *types.Alias:
			t = t.Underlying()
		case *types.Struct:
			return u, true
		default:
			return nil, false
		}
	}
}

// jsonFields returns the fields of struct st by JSON name, flattening
// embedded fields tagged `json:",inline"` (or untagged embedded structs,
// as encoding/json does). Each value is the chain of fields from st.
func jsonFields(st *types.Struct) map[string][]*types.Var {
	out := map[string][]*types.Var{}
	for i := range st.NumFields() {
		f := st.Field(i)
		tag := reflect.StructTag(st.Tag(i)).Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Embedded() && name == "" {
			if inner, ok := derefStruct(f.Type()); ok {
				for n, chain := range jsonFields(inner) {
					if _, dup := out[n]; !dup {
						out[n] = append([]*types.Var{f}, chain...)
					}
				}
				continue
			}
		}
		if name == "" {
			name = f.Name()
		}
		out[name] = []*types.Var{f}
	}
	return out
}

// elem strips pointers, slices and maps down to the element type, and
// reports how many array levels it crossed.
func elem(t types.Type) (types.Type, int) {
	arrays := 0
	for {
		switch u := t.Underlying().(type) {
		case *types.Pointer:
			t = u.Elem()
		case *types.Slice:
			t, arrays = u.Elem(), arrays+1
		case *types.Map:
			t = u.Elem()
		default:
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
				continue
			}
			return t, arrays
		}
	}
}

// property is one CRD property path and the Go field chain it decodes
// into; own reports whether the property's parent type is declared in
// one of apiTypes' packages (karpx's or Karpenter's API), so that the
// field's meaning is karpx's to implement. Properties inside types of
// other packages (corev1.Taint, metav1.Condition, …) follow their parent:
// code that reads the parent hands the whole value to Kubernetes'
// semantics.
type property struct {
	path  string
	field *types.Var
	own   bool
}

// properties walks schema and the Go type together and returns every
// property path with its field. A property without a Go field is an
// error: the object would decode with it dropped.
func properties(t *testing.T, schema *apiextensionsv1.JSONSchemaProps, typ types.Type, path string, apiPkgs map[string]bool, out *[]property) {
	st, ok := derefStruct(typ)
	if !ok {
		return
	}
	named, _ := typ.(*types.Named)
	if p, ok := typ.(*types.Pointer); ok {
		named, _ = p.Elem().(*types.Named)
	}
	own := named != nil && named.Obj().Pkg() != nil && apiPkgs[named.Obj().Pkg().Path()]
	fields := jsonFields(st)
	for name, sub := range schema.Properties {
		child := name
		if path != "" {
			child = path + "." + name
		}
		if path == "" && (name == "apiVersion" || name == "kind" || name == "metadata") {
			continue
		}
		chain, ok := fields[name]
		if !ok {
			t.Errorf("CRD property %s has no Go field in %s", child, typ)
			continue
		}
		f := chain[len(chain)-1]
		*out = append(*out, property{path: child, field: f, own: own})
		et, arrays := elem(f.Type())
		p := child + strings.Repeat("[]", arrays)
		s := &sub
		for range arrays {
			if s.Items == nil || s.Items.Schema == nil {
				break
			}
			s = s.Items.Schema
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			s = s.AdditionalProperties.Schema
		}
		if len(s.Properties) > 0 {
			properties(t, s, et, p, apiPkgs, out)
		}
	}
}

// covered reports whether list covers path of kind (the entry's path or
// below it). An entry limited to a value covers its property only for the
// value "true": a boolean whose only other value is its default, which
// asks for nothing.
func covered(list []UnsupportedField, kind, path string) (UnsupportedField, bool) {
	for _, u := range list {
		if u.Kind == kind && (u.Value == "" || u.Value == "true") && (path == u.Path || strings.HasPrefix(path, u.Path+".") || strings.HasPrefix(path, u.Path+"[]")) {
			return u, true
		}
	}
	return UnsupportedField{}, false
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// coverageRow is one CRD property: whether production code reads it
// (under status: or writes it), and whether its parent type is declared
// in an API package (see property).
type coverageRow struct {
	kind, path, field string
	own, read         bool
}

var (
	coverageOnce sync.Once
	coverageRows []coverageRow
)

// crdCoverage walks every property of every CRD in manifests/crds with
// its Go field and finds whether production code reads it, once per test
// binary (go/packages type-checks the production packages: about 15-30 s).
func crdCoverage(t *testing.T) []coverageRow {
	t.Helper()
	if testing.Short() {
		t.Skip("type-checks the autoscaler, webhook and plugin (15-30 s)")
	}
	coverageOnce.Do(func() { coverageRows = loadCoverage(t) })
	if len(coverageRows) == 0 {
		t.Fatal("no CRD property found (an earlier test failed loading them)")
	}
	return coverageRows
}

func loadCoverage(t *testing.T) []coverageRow {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	apiPkgs := map[string]bool{}
	for _, at := range apiTypes {
		apiPkgs[at[0]] = true
	}
	patterns := append([]string{}, productionPatterns...)
	for p := range apiPkgs {
		patterns = append(patterns, p)
	}
	cfg := &packages.Config{Dir: repoRoot(t), Mode: packages.NeedName | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	var prod, api []*packages.Package
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		if apiPkgs[p.PkgPath] {
			byPath[p.PkgPath] = p
			api = append(api, p)
			continue
		}
		prod = append(prod, p)
	}
	read, written := fieldUses(t, prod, api)
	if len(read) == 0 {
		t.Fatal("no field reads found in production code")
	}
	var rows []coverageRow
	for _, crd := range all {
		kind := crd.Spec.Names.Kind
		if deniedKind(crd.Spec.Group, kind) {
			// KX203 denies the whole kind: every property of it is
			// denied with it.
			continue
		}
		at, ok := apiTypes[kind]
		if !ok {
			t.Fatalf("CRD %s: no Go type in apiTypes; add it", crd.Name)
		}
		p := byPath[at[0]]
		obj := p.Types.Scope().Lookup(at[1])
		if obj == nil {
			t.Fatalf("%s.%s not found", at[0], at[1])
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil {
				continue
			}
			var props []property
			properties(t, v.Schema.OpenAPIV3Schema, obj.Type(), "", apiPkgs, &props)
			for _, pr := range props {
				key := fieldKey(p.Fset, pr.field)
				rows = append(rows, coverageRow{kind: kind, path: pr.path, field: pr.field.Name(), own: pr.own,
					read: read[key] || (strings.HasPrefix(pr.path, "status.") && written[key])})
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].kind != rows[j].kind {
			return rows[i].kind < rows[j].kind
		}
		return rows[i].path < rows[j].path
	})
	return rows
}

// uncovered checks rows against a deny list: missing are the properties
// of an API type that nothing reads and list does not cover; readDenied
// the entries for a property production code reads (outside
// readButDenied); unused the entries that name no property.
func uncovered(rows []coverageRow, list []UnsupportedField) (missing, readDenied, unused []string) {
	seen := map[string]bool{}
	for _, r := range rows {
		u, denied := covered(list, r.kind, r.path)
		if denied {
			seen[u.Kind+" "+u.Path] = true
		}
		switch {
		case denied && r.read && r.path == u.Path && readButDenied[r.kind+" "+r.path] == "":
			readDenied = append(readDenied, r.kind+" "+r.path)
		case denied || !r.own:
		case !r.read:
			missing = append(missing, fmt.Sprintf("%s %s (Go field %s)", r.kind, r.path, r.field))
		}
	}
	for _, u := range list {
		if (u.Value == "" || u.Value == "true") && !seen[u.Kind+" "+u.Path] {
			unused = append(unused, u.Kind+" "+u.Path)
		}
	}
	return missing, readDenied, unused
}

// readButDenied are deny-list entries that production code reads, and
// why that read does not implement the field.
var readButDenied = map[string]string{}

// TestEveryCRDPropertyReadOrDenied is the "never accepted and ignored"
// check: every property of every CRD in manifests/crds is read by karpx's
// production code (a selector of its Go field in autoscaler/, webhook/,
// plugin/ or cmd/, directly or through a function of the API packages it
// calls, found with go/packages and type information, so a same-named
// field of another type does not count; generated DeepCopy functions do
// not count) or covered by the deny list (unsupportedFields), which the
// webhook and kubectl karpx lint enforce. Under status, a field karpx
// writes counts too: karpx produces it. A deny-list entry for a field
// production code reads fails as well, unless readButDenied says why.
func TestEveryCRDPropertyReadOrDenied(t *testing.T) {
	rows := crdCoverage(t)
	missing, readDenied, unused := uncovered(rows, unsupportedFields)
	for _, m := range missing {
		t.Errorf("accepted and ignored: %s is neither read by production code nor in lint's deny list (unsupportedFields)", m)
	}
	for _, r := range readDenied {
		t.Errorf("%s is read by production code but in the deny list: remove its entry or say why in readButDenied", r)
	}
	for _, u := range unused {
		t.Errorf("deny-list entry %s names no CRD property", u)
	}
	own, read := 0, 0
	for _, r := range rows {
		if r.own {
			own++
			if r.read {
				read++
			}
		}
	}
	t.Logf("%d CRD properties, %d of them in karpx's or Karpenter's API types: %d read by production code, %d deny-list entries", len(rows), own, read, len(unsupportedFields))
}

// TestCoverageFindsIgnoredFields is the control: without its deny-list
// entry, spec.instanceStorePolicy (which no production code reads) is
// reported as accepted and ignored; an entry for a field the autoscaler
// reads (spec.userData) is reported as hiding an implemented field; an
// entry naming no property is reported.
func TestCoverageFindsIgnoredFields(t *testing.T) {
	rows := crdCoverage(t)
	var list []UnsupportedField
	for _, u := range unsupportedFields {
		if u.Path != "spec.instanceStorePolicy" {
			list = append(list, u)
		}
	}
	list = append(list, UnsupportedField{Kind: "EC2NodeClass", Path: "spec.userData"}, UnsupportedField{Kind: "EC2NodeClass", Path: "spec.noSuchField"})
	missing, readDenied, unused := uncovered(rows, list)
	if strings.Join(missing, ",") != "EC2NodeClass spec.instanceStorePolicy (Go field InstanceStorePolicy)" {
		t.Errorf("missing %v", missing)
	}
	if strings.Join(readDenied, ",") != "EC2NodeClass spec.userData" {
		t.Errorf("read but denied %v", readDenied)
	}
	if strings.Join(unused, ",") != "EC2NodeClass spec.noSuchField" {
		t.Errorf("unused %v", unused)
	}
}

// deniedKind reports whether unsupportedKinds denies every object of
// kind in group, whatever the version.
func deniedKind(group, kind string) bool {
	for k := range unsupportedKinds {
		if k[1] == kind && strings.HasPrefix(k[0], group+"/") {
			return true
		}
	}
	return false
}
