package lint

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// corpusModule is the Karpenter AWS provider release whose userData is the
// false-positive corpus (issue 31 item 4); it is read where `go mod
// download` put it, never copied into this repository.
const corpusModule = "github.com/aws/karpenter-provider-aws@v1.14.0"

// corpusEntry is one userData of the corpus.
type corpusEntry struct {
	name, family, text string
}

// corpusDir returns the module's directory in the module cache, or "".
func corpusDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return ""
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(corpusModule))
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	return dir
}

// corpusEntries reads every userData of the module: the EC2NodeClasses of
// examples/ (the family as Karpenter derives it, amiFamily or the alias),
// and the userData inputs of its e2e suites and launch template tests
// (the family named by the file's prefix). The module zip has no website/
// directory (the docs live only in the Git repository), so the docs'
// userData is not part of it.
func corpusEntries(t *testing.T, dir string) []corpusEntry {
	t.Helper()
	var out []corpusEntry
	examples, _ := filepath.Glob(filepath.Join(dir, "examples", "*", "*.yaml"))
	for _, p := range examples {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(b), "\n---") {
			var nc apisv1.EC2NodeClass
			if err := yaml.Unmarshal([]byte(doc), &nc); err != nil || nc.Kind != "EC2NodeClass" || nc.Spec.UserData == nil {
				continue
			}
			rel, _ := filepath.Rel(dir, p)
			out = append(out, corpusEntry{name: rel + "#" + string(rune('0'+i)), family: nc.AMIFamilyName(), text: *nc.Spec.UserData})
		}
	}
	inputs, _ := filepath.Glob(filepath.Join(dir, "test", "suites", "*", "testdata", "*"))
	goldens, _ := filepath.Glob(filepath.Join(dir, "pkg", "providers", "launchtemplate", "testdata", "*input*"))
	for _, p := range append(inputs, goldens...) {
		base := filepath.Base(p)
		family := ""
		switch {
		case strings.HasPrefix(base, "amd_"):
			family = apisv1.AMIFamilyCustom // extended_resources_test.go sets AMIFamilyCustom
		case strings.HasPrefix(base, "al2023_"), strings.HasPrefix(base, "hugepage_"):
			family = apisv1.AMIFamilyAL2023
		case strings.HasPrefix(base, "al2_"):
			family = apisv1.AMIFamilyAL2
		case strings.HasPrefix(base, "br_"):
			family = apisv1.AMIFamilyBottlerocket
		case strings.HasPrefix(base, "windows_"):
			family = apisv1.AMIFamilyWindows2022
		default:
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		// The suites fill the %s placeholders with fmt.Sprintf (cluster
		// name, endpoint, CA, NodePool name); any value does for the rules.
		text := strings.ReplaceAll(string(b), "%s", "corpus-value")
		out = append(out, corpusEntry{name: rel, family: family, text: text})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// corpusWarnings explains every warning the corpus may give, by file and
// rule: the corpus test fails on any other.
var corpusWarnings = map[string]string{
	"pkg/providers/launchtemplate/testdata/al2023_mime_userdata_input.golden KX008": ownedByMergeTest,
	"pkg/providers/launchtemplate/testdata/al2023_yaml_userdata_input.golden KX008": ownedByMergeTest,
	"pkg/providers/launchtemplate/testdata/br_userdata_input.golden KX008":          ownedByMergeTest,
	"test/suites/ami/testdata/al2023_userdata_input.yaml KX008": "the AMI suite's AL2023 NodeConfig input sets the cluster, CIDR, " +
		"node labels and taints that Karpenter's merge also sets (the suite checks the merged result): a true KX008.",
	"test/suites/ami/testdata/br_userdata_input.sh KX008": "the AMI suite's Bottlerocket input sets settings.kubernetes.node-taints, " +
		"which Karpenter replaces with the NodePool's taints (the suite then expects the NodePool's taints on the node): a true KX008.",
}

// ownedByMergeTest explains KX008 on the launch template tests' inputs:
// they set the cluster name, endpoint, CA, CIDR, max-pods, labels and
// taints precisely to show that Karpenter's merge overrides them.
const ownedByMergeTest = "Karpenter's launch template test input sets the settings Karpenter owns to show that its merge replaces them: a true KX008."

// corpusDenials are the corpus's userData that do what a deny rule
// forbids on purpose, by file and rule, with the reason.
var corpusDenials = map[string]string{
	"test/suites/integration/testdata/amd_driver_input.sh KX003": "Karpenter's AMD GPU e2e test runs bootstrap.sh and then reboot, " +
		"and installs a unit whose script reboots again, on a Custom AMI (its comment: \"We use a Custom AMI so that we can reboot " +
		"after we start the kubelet service\"): a node that reboots after it registers, which KX003 exists to deny.",
}

// TestCorpusNoDenials runs every userData of Karpenter's examples and test
// inputs through the rules (issue 31 item 4): none is denied but the deliberate
// reboot of corpusDenials, and each warning is one explained in
// corpusWarnings.
func TestCorpusNoDenials(t *testing.T) {
	dir := corpusDir(t)
	if dir == "" {
		t.Skipf("%s is not in the module cache; run `go mod download -json %s` to read the corpus", corpusModule, corpusModule)
	}
	entries := corpusEntries(t, dir)
	if len(entries) < 10 {
		t.Fatalf("found %d userData in %s, want at least 10: has the module's layout changed?", len(entries), dir)
	}
	var report bytes.Buffer
	for _, e := range entries {
		fs := CheckUserData(e.family, e.text)
		for _, f := range fs {
			report.WriteString(e.name + " " + f.RuleID + " " + string(f.Severity) + "\n")
			switch {
			case f.Severity == SeverityDeny && corpusDenials[e.name+" "+f.RuleID] != "":
			case f.Severity == SeverityDeny:
				t.Errorf("%s (%s): denied: %s", e.name, e.family, f)
			case corpusWarnings[e.name+" "+f.RuleID] == "":
				t.Errorf("%s (%s): unexplained warning: %s", e.name, e.family, f)
			}
		}
	}
	t.Logf("%d userData from %s; findings:\n%s", len(entries), dir, report.String())
}
