package lint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// Seed corpora: the userData of every shared Karpenter example (when the
// shared directory is present) plus hand-written edge cases. Under plain
// `go test` each fuzz target runs only these seeds; run e.g.
// `go test ./lint -run '^$' -fuzz FuzzParseMIME -fuzztime 60s` to fuzz.

var mimeSeeds = []string{
	al2023MIME,
	"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"B\"\r\n\r\n--B\r\nContent-Type: text/x-shellscript\r\n\r\necho hi\r\n--B--\r\n",
	"Content-Type: multipart/mixed; boundary=B\n\npreamble\n--B\n\nno headers\n--B\nContent-Transfer-Encoding: base64\n\naGk=\n--B--\nepilogue\n",
	"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\necho\n",
	"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\n",
	"MIME-Version: 1.0\nContent-Type: text/plain\n\nx\n",
	"MIME-Version: 1.0\n X-Folded: a\n",
	"Content-Type: multipart/mixed; boundary=\"\"\n\n",
	"Content-Type: multipart/mixed; boundary=B\nContent-Transfer-Encoding: quoted-printable\n\n--B\nContent-Transfer-Encoding: quoted-printable\n\nsystemctl=20restart kubelet=\n--B--\n",
}

var nodeConfigSeeds = []string{
	"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  instance:\n    localStorage:\n      strategy: Mount\n",
	"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [--node-labels=a=b]\n",
	"# only a comment\n",
	"- a\n- b\n",
	"apiVersion: [\n",
	"kind: NodeConfig\n",
	"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: 3\n",
	"&a [*a]\n",
}

var tomlSeeds = []string{
	"[settings.kubernetes]\nmax-pods = 110\n[settings.kubernetes.node-labels]\n\"team\" = \"a\"\n",
	"settings.kubernetes.api-server = \"https://x\"\n",
	"[settings.host-containers.admin]\nenabled = true\nsuperpowered = true\nuser-data = '''\nmulti\nline'''\n",
	"[[a]]\nb = 1\n[[a]]\nb = 2\n",
	"a = = 1\n",
	"[settings\n",
	"x = \"\"\"\n",
}

var powerShellSeeds = []string{
	"New-Item -Path 'C:\\temp\\' -ItemType Directory\n",
	"<powershell>\nWrite-Host hi\n</powershell>\n<persist>true</persist>\n",
	"<POWERSHELL>Restart-Service kubelet</POWERSHELL>",
	"</powershell><powershell>",
	"<powershell>\n<powershell>\n",
}

func exampleUserData(f *testing.F) []string {
	_, err := os.Stat(filepath.Join("..", "..", "shared", "data", "karpenter-examples"))
	if err != nil {
		return nil
	}
	var out []string
	for _, objs := range loadExamples(f) {
		for _, o := range objs {
			if o.EC2NodeClass != nil && o.EC2NodeClass.Spec.UserData != nil {
				out = append(out, *o.EC2NodeClass.Spec.UserData)
			}
		}
	}
	return out
}

func seed(f *testing.F, seeds ...[]string) {
	for _, ss := range seeds {
		for _, s := range ss {
			f.Add(s)
		}
	}
}

// checkParseError asserts err is nil or a *ParseError with a line inside text.
func checkParseError(t *testing.T, text string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error is %T, want *ParseError: %v", err, err)
	}
	if n := len(splitLines(text)); pe.Line < 0 || pe.Line > n+1 {
		t.Fatalf("error line %d outside 0..%d: %v", pe.Line, n+1, err)
	}
}

func FuzzParseMIME(f *testing.F) {
	seed(f, mimeSeeds, exampleUserData(f))
	f.Fuzz(func(t *testing.T, text string) {
		doc, err := ParseMIME(text)
		checkParseError(t, text, err)
		if err != nil {
			return
		}
		n := len(splitLines(text))
		normalized := strings.ReplaceAll(text, "\r\n", "\n")
		for i, p := range doc.Parts {
			if p.HeaderLine < 1 || p.BodyLine <= p.HeaderLine || p.BodyLine > n+1 {
				t.Fatalf("part %d lines header=%d body=%d outside 1..%d", i+1, p.HeaderLine, p.BodyLine, n)
			}
			if !p.Encoded && !strings.Contains(normalized, p.Body) {
				t.Fatalf("part %d body is not a substring of the input", i+1)
			}
		}
		if len(doc.Parts) == 0 {
			t.Fatal("document with no parts accepted")
		}
		// The lenient parse accepts everything the strict one does.
		if _, err := parseMIME(text, false); err != nil {
			t.Fatalf("lenient parse rejects a strictly valid document: %v", err)
		}
	})
}

func FuzzParseNodeConfig(f *testing.F) {
	seed(f, nodeConfigSeeds)
	f.Fuzz(func(t *testing.T, text string) {
		docs, err := ParseNodeConfig(text)
		checkParseError(t, text, err)
		if err == nil && len(docs) == 0 {
			t.Fatal("no documents and no error")
		}
		for _, d := range docs {
			if v, _ := scalarAt(d.Root, "apiVersion"); v != NodeConfigAPIVersion {
				t.Fatalf("accepted apiVersion %q", v)
			}
		}
		_ = nodeConfigOwnedFindings(docs, 0)
	})
}

func FuzzParseTOML(f *testing.F) {
	seed(f, tomlSeeds)
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseBottlerocketTOML(text)
		checkParseError(t, text, err)
		if err != nil {
			return
		}
		n := len(splitLines(text))
		for k, l := range s.Lines {
			if l < 1 || l > n {
				t.Fatalf("key %q at line %d outside 1..%d", k, l, n)
			}
		}
		_ = s.ownedFindings()
	})
}

func FuzzParsePowerShell(f *testing.F) {
	seed(f, powerShellSeeds)
	f.Fuzz(func(t *testing.T, text string) {
		ps, err := ParsePowerShell(text)
		checkParseError(t, text, err)
		if err == nil && !strings.Contains(text, ps.Body) {
			t.Fatal("body is not a substring of the input")
		}
	})
}

// FuzzCheckUserData runs every rule for every family on arbitrary text:
// it must not panic, and every finding must be complete, point inside the
// text and fit in an admission warning.
func FuzzCheckUserData(f *testing.F) {
	seed(f, mimeSeeds, nodeConfigSeeds, tomlSeeds, powerShellSeeds, exampleUserData(f), []string{
		"#!/bin/bash\nsudo -u root systemctl --no-block restart kubelet.service && reboot\n",
		"#!/bin/bash\ncurl http://x | sh; bash <(curl http://y)\n",
	})
	families := []string{"", apisv1.AMIFamilyAL2, apisv1.AMIFamilyAL2023, apisv1.AMIFamilyBottlerocket, apisv1.AMIFamilyWindows2022, apisv1.AMIFamilyCustom}
	f.Fuzz(func(t *testing.T, text string) {
		n := len(splitLines(text))
		for _, fam := range families {
			for _, fd := range CheckUserData(fam, text) {
				if fd.RuleID == "" || fd.Message == "" || fd.Fix == "" || fd.Line < 0 || fd.Line > n+1 {
					t.Fatalf("%s: bad finding %+v (lines %d)", fam, fd, n)
				}
				if len(fd.Warning()) > MaxWarningLength {
					t.Fatalf("%s: warning too long: %q", fam, fd.Warning())
				}
			}
		}
	})
}
