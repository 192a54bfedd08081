package webhook

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kxlint "github.com/karpx/karpx/lint"
)

// shellVocabulary is what FuzzWebhookLintVerdict builds scripts from: each
// input byte picks one token, so the fuzzer explores command lines made of
// the words the rules care about (power commands, systemctl verbs, the
// agents, wrappers, quoting, variables, here-documents, pipes) rather than
// random bytes that never parse.
var shellVocabulary = []string{
	"reboot", "shutdown", "-r", "now", "-c", "poweroff", "halt", "kexec", "-e", "init", "6", "telinit",
	"systemctl", "restart", "stop", "start", "status", "isolate", "reboot.target", "mask", "disable", "--now", "--no-block",
	"kubelet", "containerd", "kubelet.service", "chronyd", "sshd",
	"service", "pkill", "-f", "killall", "kill", "-9", "$(pidof kubelet)", "pgrep",
	"sh", "bash", "-c", "eval", "sudo", "nohup", "env", "at", "now", "sleep", "60", "echo", "printf",
	"'", "\"", "$X", "X=kubelet", "X=chronyd", "${X}", "for s in kubelet sshd; do systemctl restart $s; done",
	"|", "&", "&&", ";", "\n", "(", ")", "<<EOF\nreboot\nEOF\n", "<<<", "#", ">", "/proc/sysrq-trigger", "b",
	"curl", "http://x/i.sh", "https://x/i.sh", "|", "xargs",
}

// genScript turns fuzz input into a script over shellVocabulary.
func genScript(data []byte) string {
	var b strings.Builder
	for i, c := range data {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellVocabulary[int(c)%len(shellVocabulary)])
	}
	return b.String()
}

var ruleIDRE = regexp.MustCompile(`KX\d{3}`)

// FuzzWebhookLintVerdict feeds generated shell scripts and cloud-config
// (the script as a runcmd entry, or as a list-form entry) through the
// webhook's admission handler and through kubectl karpx lint's path
// (DecodeObjects of a YAML manifest, LintObjects), and requires the same
// verdict and the same denying rules.
func FuzzWebhookLintVerdict(f *testing.F) {
	for _, s := range [][]byte{
		{12, 13, 23}, {12, 13, 26}, {0}, {49, 51, 12, 13, 23, 51},
		{57, 59, 12, 13, 54, 48}, {43, 51, 12, 13, 23}, {63, 71}, {79, 81, 80, 42},
	} {
		for mode := uint8(0); mode < 3; mode++ {
			f.Add(s, mode)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		if len(data) > 64 {
			data = data[:64]
		}
		script := genScript(data)
		var userData string
		switch mode % 3 {
		case 0:
			userData = "#!/bin/bash\n" + script + "\n"
		case 1:
			q, _ := json.Marshal(script)
			userData = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/cloud-config\n\n#cloud-config\nruncmd:\n  - " + string(q) + "\n--B--\n"
		default:
			words := strings.Fields(script)
			q, _ := json.Marshal(words)
			userData = "#cloud-config\nbootcmd:\n  - " + string(q) + "\n"
		}

		// The webhook.
		obj, err := json.Marshal(map[string]any{
			"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": map[string]any{"name": "nc"},
			"spec": map[string]any{"amiSelectorTerms": []any{map[string]any{"alias": "al2023@latest"}}, "userData": userData},
		})
		if err != nil {
			t.Fatal(err)
		}
		out, code := serveReview(t, "application/json", reviewJSON("admission.k8s.io/v1", "u", "CREATE", string(obj)))
		if code != 200 {
			t.Fatalf("webhook HTTP %d for %q", code, userData)
		}
		var webhookRules []string
		if !out.Response.Allowed {
			webhookRules = uniqueSorted(ruleIDRE.FindAllString(out.Response.Result.Message, -1))
		}

		// kubectl karpx lint's path.
		manifest, err := yaml.Marshal(map[string]any{
			"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": map[string]any{"name": "nc"},
			"spec": map[string]any{"amiSelectorTerms": []any{map[string]any{"alias": "al2023@latest"}}, "userData": userData},
		})
		if err != nil {
			t.Fatal(err)
		}
		objs, skipped, err := kxlint.DecodeObjects(strings.NewReader(string(manifest)), "fuzz.yaml")
		if err != nil || len(skipped) > 0 || len(objs) != 1 {
			t.Fatalf("lint cannot decode the manifest: %v %+v", err, skipped)
		}
		var lintRules []string
		for _, f := range kxlint.LintObjects(context.Background(), objs, nil, nil) {
			if f.Severity == kxlint.SeverityDeny {
				lintRules = append(lintRules, f.RuleID)
			}
		}
		lintRules = uniqueSorted(lintRules)
		if out.Response.Allowed != (len(lintRules) == 0) || !slices.Equal(webhookRules, lintRules) {
			t.Fatalf("webhook allowed=%v rules %v, lint denies %v, for userData %q", out.Response.Allowed, webhookRules, lintRules, userData)
		}
	})
}

func uniqueSorted(ss []string) []string {
	slices.Sort(ss)
	return slices.Compact(ss)
}
