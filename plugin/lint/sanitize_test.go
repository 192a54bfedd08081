package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"default":          "default",
		"ünïcode\tname":    "ünïcode\tname",
		"a\x1b[2Jb":        `a\x1b[2Jb`,
		"bell\a\r\nback\b": `bell\a\r\nback\b`,
		"csi\u009b31m":     `csi\u009b31m`,
		"del\x7f":          `del\x7f`,
		"bad\xffutf8":      `bad\xffutf8`,
		"":                 "",
	} {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// Object names and file names from the input reach the terminal escaped:
// a manifest cannot clear the screen or rewrite earlier lines.
func TestLintOutputEscapesTerminalCharacters(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "x\x1b]0;title\a.yaml")
	class := strings.Replace(restartClass, `"name":"b"`, `"name":"b\u001b[2J\u009b1m"`, 1)
	skippedDoc := "\n---\napiVersion: v1\nkind: \"Config\\e[31mMap\"\nmetadata: {name: \"c\\e[2J\"}\n"
	if err := os.WriteFile(name, []byte(class+skippedDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-f", name}, {"-f", name, "-o", "wide"}, {"-f", name, "-o", "name"}} {
		out, errOut, _ := runStreams(t, nil, args...)
		for _, s := range []string{out, errOut} {
			if strings.ContainsAny(s, "\x1b\a\u009b") {
				t.Errorf("%v: output holds terminal control characters: %q", args, s)
			}
		}
		if !strings.Contains(out, `b\x1b[2J`) {
			t.Errorf("%v: the escaped name is not in the output: %q", args, out)
		}
	}
}
