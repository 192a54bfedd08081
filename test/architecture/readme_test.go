package architecture

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// layoutPaths returns the paths README.md's "## Layout" table names in
// its first column (`a/`, `b/c`, several per cell).
func layoutPaths(readme string) []string {
	_, after, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		return nil
	}
	if end := strings.Index(after, "\n## "); end >= 0 {
		after = after[:end]
	}
	code := regexp.MustCompile("`([^`]+)`")
	var paths []string
	for _, line := range strings.Split(after, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			paths = append(paths, m[1])
		}
	}
	return paths
}

// TestReadmeLayoutPathsExist checks that every path in README.md's layout
// table exists, so that the table follows a move or a rename.
func TestReadmeLayoutPathsExist(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	paths := layoutPaths(string(data))
	if len(paths) < 5 {
		t.Fatalf("README.md's layout table names %d paths (%v): table moved or reformatted?", len(paths), paths)
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join("../..", p)); err != nil {
			t.Errorf("README.md layout table: %s: %v", p, err)
		}
	}
}

// TestLayoutPathsParse is the control: a made-up table yields its paths,
// several per cell, and nothing from the description column.
func TestLayoutPathsParse(t *testing.T) {
	readme := "# x\n\n## Layout\n\n| path | what |\n|---|---|\n| `a/`, `b/c` | see `not/this` |\n| `d` | d |\n\n## Next\n| `e` | e |\n"
	got := strings.Join(layoutPaths(readme), " ")
	if got != "a/ b/c d" {
		t.Errorf("layoutPaths = %q, want %q", got, "a/ b/c d")
	}
}

// layoutRow is one row of README.md's layout table: the paths of its
// first column and the code spans (`x`) of its second.
type layoutRow struct {
	paths, names []string
}

// layoutRows returns the rows of README.md's "## Layout" table.
func layoutRows(readme string) []layoutRow {
	_, after, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		return nil
	}
	if end := strings.Index(after, "\n## "); end >= 0 {
		after = after[:end]
	}
	code := regexp.MustCompile("`([^`]+)`")
	var rows []layoutRow
	for _, line := range strings.Split(after, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		var r layoutRow
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			r.paths = append(r.paths, strings.TrimSuffix(m[1], "/"))
		}
		for _, m := range code.FindAllStringSubmatch(strings.Join(cells[2:], "|"), -1) {
			r.names = append(r.names, m[1])
		}
		rows = append(rows, r)
	}
	return rows
}

// unnamedPackages returns the packages of pkgs (slash paths from the
// module root) that no row of rows names: a row names a package when its
// first column holds the package's path, or a directory above it whose
// row's description holds the package's path relative to that directory,
// exactly or as a path.Match pattern (`providers/*`).
func unnamedPackages(rows []layoutRow, pkgs []string) []string {
	var out []string
	for _, pkg := range pkgs {
		named := false
		for _, r := range rows {
			for _, p := range r.paths {
				if pkg == p {
					named = true
				}
				rel, ok := strings.CutPrefix(pkg, p+"/")
				if !ok {
					continue
				}
				for _, n := range r.names {
					if m, err := path.Match(n, rel); n == rel || (err == nil && m) {
						named = true
					}
				}
			}
		}
		if !named {
			out = append(out, pkg)
		}
	}
	return out
}

// TestReadmeLayoutNamesEveryAutoscalerPackage checks that README.md's
// layout rows for autoscaler/ name every package under autoscaler/
// (go list ./autoscaler/...), so a new or moved package shows in the
// layout the reader starts from.
func TestReadmeLayoutNamesEveryAutoscalerPackage(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, p := range goList(t, "./autoscaler/...") {
		pkgs = append(pkgs, strings.TrimPrefix(p, module+"/"))
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list ./autoscaler/... listed %d packages: %v", len(pkgs), pkgs)
	}
	for _, pkg := range unnamedPackages(layoutRows(string(data)), pkgs) {
		t.Errorf("README.md's layout table does not name %s: add it (its path relative to its row's directory, in backticks) to the row of its tree", pkg)
	}
}

// TestUnnamedPackagesFindsAPlantedOne is the control: in a made-up table,
// a package named by its own row, by its relative path and by a pattern
// passes; one left out of its row's description is reported.
func TestUnnamedPackagesFindsAPlantedOne(t *testing.T) {
	readme := "# x\n\n## Layout\n\n| path | what |\n|---|---|\n| `a/x` | x |\n| `a/` | `b/c` and `p/*` (`q`) |\n\n## Next\n"
	got := unnamedPackages(layoutRows(readme), []string{"a/x", "a/b/c", "a/p/one", "a/p/q/deep", "a/missing"})
	if want := []string{"a/p/q/deep", "a/missing"}; !slices.Equal(got, want) {
		t.Errorf("unnamedPackages = %v, want %v", got, want)
	}
}
