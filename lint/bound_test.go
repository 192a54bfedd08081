package lint

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

func TestBlankCommentLinesKeepsLinesAndDelimiters(t *testing.T) {
	// 64 comment lines after each case, so that blanking applies.
	pad, blank := strings.Repeat("#\n", 64), strings.Repeat("\n", 64)
	for _, tc := range []struct{ in, want string }{
		{"#!/bin/bash\n# a\n  # b\necho x # c\n", "#!/bin/bash\n\n\necho x # c\n"},
		{"echo a\\\n#b\n# c\n", "echo a\\\n#b\n\n"},
		{"cat <<'#E'\nx\n#E\n# y\n", "cat <<'#E'\nx\n#E\n\n"},
		{"cat <<-\"#E\"\n\t#E\n", "cat <<-\"#E\"\n\t#E\n"},
		{"cat <<$'#E'\n#E\n", "cat <<$'#E'\n#E\n"},
		{"no comments\n", "no comments\n"},
	} {
		if got := blankCommentLines(tc.in + pad); got != tc.want+blank {
			t.Errorf("blankCommentLines(%q + 64 comment lines) = %q, want %q", tc.in, got, tc.want+blank)
		}
		if strings.Count(blankCommentLines(tc.in+pad), "\n") != strings.Count(tc.in+pad, "\n") {
			t.Errorf("%q: line count changed", tc.in)
		}
	}
	// Control: a script with few comments is used as is.
	if in := "#!/bin/bash\n# a\necho x\n"; blankCommentLines(in) != in {
		t.Errorf("a script with 2 comments was changed: %q", blankCommentLines(in))
	}
}

// rules returns the sorted, deduplicated rule IDs of fs.
func rulesOf(fs Findings) string {
	seen := map[string]bool{}
	var ids []string
	for _, f := range fs {
		if !seen[f.RuleID] {
			seen[f.RuleID] = true
			ids = append(ids, f.RuleID)
		}
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

// padTo pads a shell script with comment lines to exactly n bytes.
func padTo(t *testing.T, script string, n int) string {
	t.Helper()
	pad := n - len(script)
	if pad < 0 {
		t.Fatalf("script is %d bytes, over %d", len(script), n)
	}
	var b strings.Builder
	b.WriteString(script)
	for pad > 0 {
		l := min(pad, 80)
		if l == 1 {
			b.WriteString("\n")
		} else {
			b.WriteString("#" + strings.Repeat("x", l-2) + "\n")
		}
		pad -= l
	}
	return b.String()
}

func TestOversizedUserDataIsNotParsed(t *testing.T) {
	script := "#!/bin/bash\nsystemctl restart kubelet\n"
	at := padTo(t, script, MaxUserDataBytes)
	if got := rulesOf(CheckUserData(apisv1.AMIFamilyAL2023, at)); got != "KX003" {
		t.Fatalf("control: %d bytes: got %s, want KX003 (inspected)", len(at), got)
	}
	over := padTo(t, script, MaxUserDataBytes+1)
	fs := CheckUserData(apisv1.AMIFamilyAL2023, over)
	if len(fs) != 1 || fs[0].RuleID != RuleUserDataSize || fs[0].Severity != SeverityDeny || fs[0].Field != "spec.userData" {
		t.Fatalf("%d bytes: got %v, want the KX001 denial alone", len(over), fs)
	}
	for _, want := range []string{"16385 bytes", "16384", "did not inspect", "S3 or SSM"} {
		if !strings.Contains(fs[0].String(), want) {
			t.Errorf("KX001 %q does not say %q", fs[0].String(), want)
		}
	}
	// 2 MB of nested "((": the input that crashed the webhook.
	bomb := "#!/bin/bash\n" + strings.Repeat("((", 1<<20) + "\n"
	if fs := CheckUserData(apisv1.AMIFamilyAL2023, bomb); len(fs) != 1 || fs[0].RuleID != RuleUserDataSize {
		t.Fatalf("2 MB of ((: got %v, want the KX001 denial alone", fs)
	}
	for _, fam := range []string{apisv1.AMIFamilyBottlerocket, apisv1.AMIFamilyWindows2022, apisv1.AMIFamilyCustom, ""} {
		if fs := CheckUserData(fam, bomb); len(fs) != 1 || fs[0].RuleID != RuleUserDataSize {
			t.Errorf("%s: got %v, want the KX001 denial alone", fam, fs)
		}
	}
}

func TestBase64UserDataDecodeBounds(t *testing.T) {
	layers := func(s string, n int) string {
		b := []byte(s)
		for range n {
			b = gzipText(t, string(b))
		}
		return b64(b)
	}
	if got := rulesOf(CheckUserData(apisv1.AMIFamilyAL2, layers(unsafeScript, 2))); got != "KX003,KX005,KX010" {
		t.Errorf("base64 of gzip within gzip: got %s, want KX003,KX005,KX010", got)
	}
	if got := rulesOf(CheckUserData(apisv1.AMIFamilyAL2, layers(unsafeScript, MaxGzipLayers))); got != "KX003,KX005,KX010" {
		t.Errorf("control: %d gzip layers: got %s, want the content inspected", MaxGzipLayers, got)
	}
	fs := CheckUserData(apisv1.AMIFamilyAL2, layers(unsafeScript, MaxGzipLayers+1))
	if got := rulesOf(fs); got != "KX010" || !strings.Contains(fs[0].Message, "more than 8 times") {
		t.Errorf("%d gzip layers: got %v, want KX010 saying the content was not inspected", MaxGzipLayers+1, fs)
	}
	big := layers(padTo(t, unsafeScript, MaxUserDataBytes+1), 1)
	fs = CheckUserData(apisv1.AMIFamilyAL2, big)
	if got := rulesOf(fs); got != "KX010" || !strings.Contains(fs[0].Message, "not inspected") {
		t.Errorf("base64 of gzip decoding to over 16 KB: got %v, want KX010 alone", fs)
	}
	if fs := CheckUserData(apisv1.AMIFamilyAL2, layers(padTo(t, unsafeScript, MaxUserDataBytes), 1)); rulesOf(fs) != "KX003,KX005,KX010" {
		t.Errorf("control: base64 of gzip decoding to 16 KB: got %v, want its content inspected", fs)
	}
}

// nest returns depth levels of open, then inner, then depth of close.
func nest(open, inner, close string, depth int) string {
	return strings.Repeat(open, depth) + inner + strings.Repeat(close, depth)
}

func TestShellNestingBound(t *testing.T) {
	// Every case is over 1 KiB, so that the bound is checked while parsing.
	head := padTo(t, "#!/bin/bash\n", 2048)
	restart := "systemctl restart kubelet"
	for _, tc := range []struct {
		name, script string
		want         string
	}{
		{"control: 40 nested arithmetic parentheses", head + "x=$(( " + nest("(", "1", ")", 40) + " ))\n" + restart + "\n", "KX003"},
		{"control: 100 nested subshells", head + nest("( ", restart, " )", 100) + "\n", "KX003"},
		// The output of systemctl is used as a command name at every level
		// above it: a command karpx cannot determine (KX009).
		{"control: 100 nested command substitutions", head + "echo " + nest("$(", restart, ")", 100) + "\n", "KX003,KX009"},
		{"control: 100 nested if", head + nest("if true; then ", restart, "; fi", 100) + "\n", "KX003"},
		{"nested (( under 16 KB", head + nest("((", "1", "))", 3000) + "\n" + restart + "\n", "KX009"},
		{"unclosed ((", head + strings.Repeat("((", 5000) + "\n", "KX009"},
		{"nested subshells", head + nest("(", restart, ")", 6000) + "\n", "KX009"},
		{"nested brace groups", head + nest("{ ", restart, "; }", 2500) + "\n", "KX009"},
		{"nested $(", head + "echo " + nest("$(", restart, ")", 4000) + "\n", "KX009"},
		{"nested in sh -c", head + "sh -c '" + nest("((", "1", "))", 3000) + "'\n", "KX009"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.script) > MaxUserDataBytes {
				t.Fatalf("case is %d bytes, over EC2's limit", len(tc.script))
			}
			fs := CheckUserData(apisv1.AMIFamilyAL2023, tc.script)
			if got := rulesOf(fs); got != tc.want {
				t.Fatalf("got %v, want %s", fs, tc.want)
			}
			if tc.want == "KX009" && !strings.Contains(fs[0].Message, "nest deeper than karpx parses") {
				t.Errorf("KX009 message %q does not say why", fs[0].Message)
			}
		})
	}
}

// TestDecompressedShellBounds: 16 KB of userData may decompress to a
// megabyte of nesting or comments; neither may cost the parser more than
// the bound, and a command after a megabyte of comments is still found.
func TestDecompressedShellBounds(t *testing.T) {
	gz := func(script string) string {
		return mimeDoc("B", "Content-Type: application/x-gzip\nContent-Transfer-Encoding: base64\n\n"+b64(gzipText(t, script)))
	}
	cases := []struct {
		name, script, want string
	}{
		{"a megabyte of nested ((", "#!/bin/bash\n" + nest("((", "1", "))", 250000) + "\n", "KX009"},
		{"a megabyte of (", "#!/bin/bash\n" + strings.Repeat("(", 1000000) + "\n", "KX009"},
		{"a megabyte of comment lines, then a restart", "#!/bin/bash\n" + strings.Repeat("#\n", 500000) + "systemctl restart kubelet\n", "KX003"},
		{"control: comments, then a here-document whose delimiter starts with #", "#!/bin/bash\n# x\ncat <<'#E'\nfoo\n#E\nsystemctl restart kubelet\n", "KX003"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ud := gz(tc.script)
			if len(ud) > MaxUserDataBytes {
				t.Fatalf("userData is %d bytes, over EC2's limit", len(ud))
			}
			if got := rulesOf(CheckUserData(apisv1.AMIFamilyAL2023, ud)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCloudConfigAliasesAndBounds(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"control: runcmd written out", "#cloud-config\nruncmd:\n  - systemctl restart kubelet\n", "KX003"},
		{"runcmd through an alias", "#cloud-config\nx-cmds: &cmds\n  - echo hi\n  - systemctl restart kubelet\nruncmd: *cmds\n", "KX003"},
		{"control: an alias to harmless commands", "#cloud-config\nx-cmds: &cmds\n  - echo hi\nruncmd: *cmds\n", ""},
		{"power_state through a merge key", "#cloud-config\nx-ps: &ps\n  mode: reboot\npower_state:\n  <<: *ps\n  message: bye\n", "KX003"},
		{"control: the merge key's mapping overridden", "#cloud-config\nx-ps: &ps\n  mode: reboot\n  condition: true\npower_state:\n  <<: *ps\n  condition: false\n", ""},
		{"write_files through an alias", "#cloud-config\nx-f: &f\n  path: /etc/cron.d/x\n  content: \"* * * * * root reboot\"\nwrite_files:\n  - *f\n", "KX003"},
		{"alias bomb", "#cloud-config\n" + aliasBomb(12) + "runcmd: *l12\n", "KX009"},
		{"deep nesting", "#cloud-config\nx: " + nest("[", "1", "]", MaxYAMLDepth+2) + "\n", "KX009"},
		{"control: nesting within the bound", "#cloud-config\nx: " + nest("[", "1", "]", 20) + "\n", ""},
		{"archive through an alias", "#cloud-config-archive\n- &p\n  type: text/x-shellscript\n  content: \"#!/bin/sh\\nreboot\\n\"\n- *p\n", "KX003"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Custom: the text is read by its first line, as cloud-init reads it.
			if got := rulesOf(CheckUserData(apisv1.AMIFamilyCustom, tc.doc)); got != tc.want {
				t.Fatalf("got %v, want [%s]\n%s", CheckUserData(apisv1.AMIFamilyCustom, tc.doc), tc.want, tc.doc)
			}
		})
	}
}

// aliasBomb is n levels of lists of ten aliases to the level below (10^n
// nodes once expanded).
func aliasBomb(n int) string {
	var b strings.Builder
	b.WriteString("x0: &l0 [\"echo hi\"]\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "x%d: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestBottlerocketTOMLNestingBound(t *testing.T) {
	for _, tc := range []struct {
		name, toml, want string
	}{
		{"control: arrays at the bound", "[settings.x]\na = " + nest("[", "1", "]", MaxTOMLDepth-1) + "\n", ""},
		{"arrays past the bound", "[settings.x]\na = " + nest("[", "1", "]", MaxTOMLDepth+1) + "\n", "KX009"},
		{"inline tables under 16 KB", "a = " + nest("{b = ", "1", "}", 2600) + "\n", "KX009"},
		{"control: brackets in strings and comments", "[settings.x]\na = \"" + strings.Repeat("[{", 100) + "\"\nb = '''\n" + strings.Repeat("[", 100) + "\n'''\n# " + strings.Repeat("{", 100) + "\nc = \"\\\"[[[[\"\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := CheckUserData(apisv1.AMIFamilyBottlerocket, tc.toml)
			if got := rulesOf(fs); got != tc.want {
				t.Fatalf("got %v, want [%s]", fs, tc.want)
			}
			if tc.want == "KX009" && !strings.Contains(fs[0].Message, "nest more than 32 levels") {
				t.Errorf("KX009 message %q does not say why", fs[0].Message)
			}
		})
	}
}

func TestMIMEPartAndGzipBounds(t *testing.T) {
	part := "Content-Type: text/x-shellscript\n\n#!/bin/sh\necho hi\n"
	many := func(n int) string {
		ps := make([]string, n)
		for i := range ps {
			ps[i] = part
		}
		return mimeDoc("B", ps...)
	}
	if got := rulesOf(CheckUserData(apisv1.AMIFamilyAL2, many(MaxMIMEParts))); got != "" {
		t.Errorf("control: %d parts: got %s, want none", MaxMIMEParts, got)
	}
	fs := CheckUserData(apisv1.AMIFamilyAL2, many(MaxMIMEParts+1))
	if got := rulesOf(fs); got != "KX009" || !strings.Contains(fs[0].Message, "more than 256 parts") {
		t.Errorf("%d parts: got %v, want KX009 naming the bound", MaxMIMEParts+1, fs)
	}
	// gzip-compressed MIME documents nested in one another, each a single
	// gzip part (so that multipart depth does not grow).
	gzipNest := func(n int) string {
		x := unsafeScript
		for range n {
			x = "MIME-Version: 1.0\nContent-Type: application/gzip\nContent-Transfer-Encoding: base64\n\n" + b64(gzipText(t, x))
		}
		return mimeDoc("B", "Content-Type: application/gzip\nContent-Transfer-Encoding: base64\n\n"+b64(gzipText(t, x)))
	}
	if got := rulesOf(CheckUserData(apisv1.AMIFamilyCustom, gzipNest(MaxGzipLayers))); got != "KX003,KX005" {
		t.Errorf("control: %d gzip layers: got %s, want KX003,KX005", MaxGzipLayers, got)
	}
	fs = CheckUserData(apisv1.AMIFamilyCustom, gzipNest(MaxGzipLayers+1))
	if !hasRule(fs, RuleUserDataUninspectable) {
		t.Errorf("%d gzip layers: got %v, want KX009", MaxGzipLayers+1, fs)
	}
}

// TestWriteFilesGzipBudgetIsPerDocument: write_files entries share one
// MaxDecodedBytes budget, as MIME parts do.
func TestWriteFilesGzipBudgetIsPerDocument(t *testing.T) {
	entry := func(i int) string {
		content := base64.StdEncoding.EncodeToString(gzipText(t, strings.Repeat("# padding\n", 300<<10/10)))
		return fmt.Sprintf("  - path: /opt/f%d\n    encoding: gz+b64\n    content: %s\n", i, content)
	}
	doc := func(n int) string {
		var b strings.Builder
		b.WriteString("#cloud-config\nwrite_files:\n")
		for i := range n {
			b.WriteString(entry(i))
		}
		return b.String()
	}
	if fs := CheckUserData(apisv1.AMIFamilyCustom, doc(3)); len(fs) != 0 {
		t.Fatalf("control: three entries (~900 KiB decompressed): got %v, want none", fs)
	}
	fs := CheckUserData(apisv1.AMIFamilyCustom, doc(4))
	if !hasRule(fs, RuleUserDataUninspectable) || !strings.Contains(fs[0].Message, "1 MiB") {
		t.Fatalf("four entries (~1.2 MiB decompressed): got %v, want KX009 naming the bound", fs)
	}
}
