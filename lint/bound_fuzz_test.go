package lint

import (
	"errors"
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// The fuzz targets of the parser entry points admission and lint reach,
// each run by `make fuzz`: whatever the input, the parser returns (no
// panic, no stack overflow) and its bound is the only reason it refuses
// input it would otherwise read.

// FuzzShellBounded wraps random shell text in a random number of nesting
// constructs (arithmetic parentheses, subshells, substitutions, brace
// groups) and checks that the scan returns, and that a script within the
// nesting bound is never refused as too deep.
func FuzzShellBounded(f *testing.F) {
	for _, s := range []string{"systemctl restart kubelet", "((1))", "$(( (a+b) ))", "# c\n#d", "cat <<'#E'\n#E\n"} {
		f.Add(s, uint16(3), uint8(0))
		f.Add(s, uint16(3000), uint8(1))
	}
	f.Fuzz(func(t *testing.T, inner string, depth uint16, kind uint8) {
		wraps := [][2]string{{"((", "))"}, {"( ", " )"}, {"echo $(", ")"}, {"{ ", "; }"}}
		w := wraps[int(kind)%len(wraps)]
		script := "#!/bin/bash\n" + nest(w[0], inner, w[1], int(depth)%6000) + "\n"
		if len(script) > MaxUserDataBytes {
			script = script[:MaxUserDataBytes]
		}
		fs := CheckUserData(apisv1.AMIFamilyAL2023, script)
		for _, fd := range fs {
			if fd.Field != "spec.userData" || fd.Message == "" || fd.Fix == "" {
				t.Fatalf("finding without field, message or fix: %+v", fd)
			}
			if fd.RuleID == RuleUserDataUninspectable && int(depth)%6000 <= 20 && len(inner) < 64 && !strings.ContainsAny(inner, "({$`") {
				t.Fatalf("a script nested %d deep refused as uninspectable: %s", int(depth)%6000, fd.String())
			}
		}
	})
}

// FuzzBottlerocketTOML parses random TOML: the nesting bound refuses only
// text nested past MaxTOMLDepth, and errors are *ParseError.
func FuzzBottlerocketTOML(f *testing.F) {
	for _, s := range []string{"[settings.kubernetes]\nmax-pods = 110\n", "a = [[1],[2]]\n", "a = {b = {c = 1}}\n", "a = \"[[[\"\n", "a = '''\n]]]\n'''\n", strings.Repeat("[", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		_, err := ParseBottlerocketTOML(text)
		var pe *ParseError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("error %v is not a *ParseError", err)
		}
		depth, _ := tomlNesting(text)
		if pe != nil && pe.Uninspectable && depth <= MaxTOMLDepth {
			t.Fatalf("refused as too deep at nesting %d: %v", depth, err)
		}
	})
}

// FuzzCloudConfigYAML scans random cloud-config (anchors, aliases, merge
// keys included): it returns, and every finding is complete.
func FuzzCloudConfigYAML(f *testing.F) {
	for _, s := range []string{"runcmd: [reboot]\n", "x: &a [reboot]\nruncmd: *a\n", "x: &p {mode: reboot}\npower_state: {<<: *p}\n", aliasBomb(6) + "runcmd: *l6\n", "a: &a [*a]\n", "write_files:\n- path: /etc/rc.local\n  content: reboot\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		for _, fd := range CheckUserData(apisv1.AMIFamilyCustom, "#cloud-config\n"+doc) {
			if fd.Field != "spec.userData" || fd.Message == "" || fd.Fix == "" {
				t.Fatalf("finding without field, message or fix: %+v", fd)
			}
		}
	})
}
