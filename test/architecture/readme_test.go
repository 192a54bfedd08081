package architecture

import (
	"os"
	"path/filepath"
	"regexp"
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
