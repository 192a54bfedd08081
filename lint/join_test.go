package lint

import (
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// nodeConfigMIME is an AL2023 MIME document with a NodeConfig part and a
// shell part.
func nodeConfigMIME(nodeConfig, script string) string {
	return "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: application/node.eks.aws\n\n" + nodeConfig +
		"\n--B\nContent-Type: text/x-shellscript\n\n" + script + "\n--B--\n"
}

const nodeConfigHead = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n"

// TestNodeJoin runs unsafe/safe twins of settings with which a node cannot
// join (issue 31, "Settings that stop the node from joining"): the unsafe
// form gets a KX013 denial at the given userData line, its twin none.
func TestNodeJoin(t *testing.T) {
	swapScript := sh + "fallocate -l 2G /swapfile\nchmod 600 /swapfile\nmkswap /swapfile\nswapon /swapfile\n"
	noFail := nodeConfigHead + "  kubelet:\n    config:\n      failSwapOn: false\n      memorySwap:\n        swapBehavior: LimitedSwap\n"
	cases := []struct {
		name, family, unsafe, safe string
		line                       int
		msg                        string
	}{
		{"swapon in a script, kubelet default", al2023,
			swapScript, sh + "fallocate -l 2G /swapfile\nchmod 600 /swapfile\nmkswap /swapfile\n",
			6, "swapon /swapfile"},
		{"swapon in a script; the twin sets failSwapOn: false in the NodeConfig", al2023,
			nodeConfigMIME(nodeConfigHead+"  kubelet:\n    config:\n      maxPods: 20\n", swapScript),
			nodeConfigMIME(noFail, swapScript),
			22, "swapon /swapfile"},
		{"swap through a variable and a function", al2023,
			sh + "f=/swapfile\non() { swap\"on\" \"$1\"; }\non \"$f\"\n",
			sh + "f=/swapfile\non() { swap\"on\" --show; }\non \"$f\"\n",
			4, "swapon /swapfile"},
		{"swap unit started by a written script", al2023,
			sh + "printf 'systemctl start swapfile.swap\\n' > /usr/local/bin/s.sh\nbash /usr/local/bin/s.sh\n",
			sh + "printf 'systemctl status swapfile.swap\\n' > /usr/local/bin/s.sh\nbash /usr/local/bin/s.sh\n",
			0, "systemctl start swapfile.swap"},
		{"cloud-config swap module", al2023,
			ccMIME("#cloud-config\nswap:\n  filename: /swap.img\n  size: 2147483648\n"),
			ccMIME("#cloud-config\nswap:\n  filename: /swap.img\n  size: 0\n"),
			10, "cloud-config swap (size 2147483648)"},
		{"AL2 bootstrap without --fail-swap-on=false", apisv1.AMIFamilyAL2,
			"#!/bin/bash\nswapon -a\n/etc/eks/bootstrap.sh my-cluster\n",
			"#!/bin/bash\nswapon -a\n/etc/eks/bootstrap.sh my-cluster --kubelet-extra-args '--fail-swap-on=false'\n",
			2, "swapon -a"},
		{"containerd config that is not TOML", al2023,
			nodeConfigHead + "  containerd:\n    config: |\n      [plugins.\"io.containerd.grpc.v1.cri\".containerd\n      discard_unpacked_layers = false\n",
			nodeConfigHead + "  containerd:\n    config: |\n      [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n      discard_unpacked_layers = false\n",
			6, "spec.containerd.config is not valid TOML at its line 1"},
		{"containerd config in a MIME part, error on its second line", al2023,
			nodeConfigMIME(nodeConfigHead+"  containerd:\n    config: |\n      [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n      discard_unpacked_layers = no\n", "#!/bin/bash\necho ok\n"),
			nodeConfigMIME(nodeConfigHead+"  containerd:\n    config: |\n      [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n      discard_unpacked_layers = false\n", "#!/bin/bash\necho ok\n"),
			13, "at its line 2"},
		{"containerd config that is a mapping", al2023,
			nodeConfigHead + "  containerd:\n    config:\n      plugins: {}\n",
			nodeConfigHead + "  containerd:\n    config: \"version = 2\"\n",
			5, "is not a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []Finding
			for _, f := range CheckUserData(tc.family, tc.unsafe) {
				if f.RuleID == ruleSwapOn {
					t.Errorf("internal swap marker leaked: %v", f)
				}
				if f.RuleID == RuleUserDataNodeJoin {
					got = append(got, f)
				}
			}
			if len(got) == 0 {
				t.Fatalf("unsafe: no KX013; findings %v", CheckUserData(tc.family, tc.unsafe))
			}
			ok := false
			for _, f := range got {
				if strings.Contains(f.Message, tc.msg) && (tc.line == 0 || f.Line == tc.line) && f.Severity == SeverityDeny {
					ok = true
				}
			}
			if !ok {
				t.Errorf("unsafe: no KX013 at line %d naming %q: %v", tc.line, tc.msg, got)
			}
			for _, f := range CheckUserData(tc.family, tc.safe) {
				if f.RuleID == RuleUserDataNodeJoin || f.RuleID == ruleSwapOn {
					t.Errorf("safe twin: unexpected %v", f)
				}
			}
		})
	}
}

// TestContainerdTOMLBounded asserts that a deeply nested containerd
// configuration is refused by the nesting bound, not parsed.
func TestContainerdTOMLBounded(t *testing.T) {
	deep := "x = " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	line, msg := containerdTOMLError(deep)
	if line != 1 || !strings.Contains(msg, "more than 32 levels") {
		t.Fatalf("got %d %q", line, msg)
	}
}
