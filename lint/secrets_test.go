package lint

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// TestSecretDetectorBuilds asserts that gitleaks' default rule set loads
// and compiles with the pinned version: a detector that failed to build
// would silently report nothing.
func TestSecretDetectorBuilds(t *testing.T) {
	specific, generic, err := secretScanners()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(specific.d.Config.Rules); n < 100 {
		t.Fatalf("gitleaks default config has %d rules besides %s, want the full set (over 100)", n, genericRuleID)
	}
	if n := len(generic.d.Config.Rules); n != 1 {
		t.Fatalf("generic scanner has %d rules, want 1", n)
	}
}

// ecKeyPEM returns a freshly generated EC private key in PEM, so that no
// real-looking key is stored in the repository.
func ecKeyPEM(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

// TestSecretsThroughDecoding runs unsafe/safe twins of credentials in
// encoded or foreign forms (issue 31, "Secrets in encoded or foreign
// forms"): each unsafe form is denied with the rule and the gitleaks rule
// ID named, its twin (a placeholder, a public key, a value fetched at
// boot) has no secret finding.
func TestSecretsThroughDecoding(t *testing.T) {
	key := ecKeyPEM(t)
	kubeconfig := func(keyData string) string {
		return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1\n    certificate-authority-data: " + b64s("-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2VydGlmaWNhdGVGb3JUZXN0MAoGCCqGSM49BAMCMBQx\n-----END CERTIFICATE-----\n") +
			"\nusers:\n- name: u\n  user:\n    client-key-data: " + keyData + "\n"
	}
	const ghToken = "ghp_R2kq8vD1xY7mZ3pL5nB9cT4wQ6eH0jA2sF8u"
	const npmToken = "npm_Zq8R2vL5kX9mN3bT7wY4pH6cJ1dF0gS2aE8u"
	cases := []struct {
		name, family, unsafe, safe, rule, gitleaksRule string
	}{
		{"GitHub token in a script", al2023,
			sh + "export GITHUB_TOKEN=" + ghToken + "\ngit clone https://github.com/org/tools\n",
			sh + "export GITHUB_TOKEN=$(aws ssm get-parameter --with-decryption --name /ci/gh --query Parameter.Value --output text)\ngit clone https://github.com/org/tools\n",
			RuleUserDataCredential, "github-pat"},
		{"npm token in a base64 write_files entry", al2023,
			ccMIME("#cloud-config\nwrite_files:\n  - path: /root/.npmrc\n    encoding: b64\n    content: " + b64s("//registry.npmjs.org/:_authToken="+npmToken+"\n")),
			ccMIME("#cloud-config\nwrite_files:\n  - path: /root/.npmrc\n    encoding: b64\n    content: " + b64s("registry=https://registry.npmjs.org/\n")),
			RuleUserDataCredential, "npm-access-token"},
		{"GitHub token in a gz+b64 write_files entry", al2023,
			ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/agent.env\n    encoding: gz+b64\n    content: " + gzb64("TOKEN="+ghToken+"\n")),
			ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/agent.env\n    encoding: gz+b64\n    content: " + gzb64("TOKEN_PARAMETER=/ci/gh\n")),
			RuleUserDataCredential, "github-pat"},
		{"private key in a kubeconfig's client-key-data", al2023,
			sh + "cat > /root/.kube/config <<'EOF'\n" + kubeconfig(b64s(key)) + "EOF\n",
			sh + "cat > /root/.kube/config <<'EOF'\n" + strings.Replace(kubeconfig(""), "client-key-data: ", "exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws, args: [eks, get-token, --cluster-name, c]}", 1) + "EOF\n",
			RuleUserDataPrivateKey, "private-key"},
		{"GitHub token in a Bottlerocket bootstrap container's user-data", apisv1.AMIFamilyBottlerocket,
			"[settings.bootstrap-containers.setup]\nsource = \"public.ecr.aws/org/setup:1\"\nmode = \"once\"\nuser-data = \"" + b64s("#!/bin/sh\nexport GITHUB_TOKEN="+ghToken+"\n") + "\"\n",
			"[settings.bootstrap-containers.setup]\nsource = \"public.ecr.aws/org/setup:1\"\nmode = \"once\"\nuser-data = \"" + b64s("#!/bin/sh\nexport GITHUB_TOKEN_PARAMETER=/ci/gh\n") + "\"\n",
			RuleUserDataCredential, "github-pat"},
		{"Docker Hub password in Bottlerocket registry credentials", apisv1.AMIFamilyBottlerocket,
			"[[settings.container-registry.credentials]]\nregistry = \"docker.io\"\nusername = \"ops\"\npassword = \"dckr_pat_Qm7vR2xK9pL4sT8wB3nZ5cY1dH6\"\n",
			"[[settings.container-registry.credentials]]\nregistry = \"docker.io\"\nusername = \"ops\"\npassword = \"<set-by-ops>\"\n",
			RuleUserDataCredential, ""},
		{"AWS access key; AWS's documented example key is a placeholder", al2023,
			sh + "aws configure set aws_access_key_id AKIA4Q6ZP7M2XJ3KD5WN\n",
			sh + "aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE\n",
			RuleUserDataAccessKey, "aws-access-token"},
		{"private key; an SSH public key is not a secret", al2023,
			sh + "cat > /etc/ssh/ssh_host_ecdsa_key <<'EOF'\n" + key + "EOF\n",
			sh + "echo 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@example' >> /home/ec2-user/.ssh/authorized_keys\n",
			RuleUserDataPrivateKey, "private-key"},
	}
	secretRules := map[string]bool{RuleUserDataAccessKey: true, RuleUserDataSecretKey: true, RuleUserDataPrivateKey: true, RuleUserDataCredential: true}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckUserData(tc.family, tc.unsafe)
			found := false
			for _, f := range got {
				if f.RuleID == tc.rule && f.Severity == SeverityDeny && strings.Contains(f.Message, "gitleaks v8.30.1 rule "+tc.gitleaksRule) {
					found = true
				}
				if strings.Contains(f.Message, ghToken) || strings.Contains(f.Message, npmToken) {
					t.Errorf("finding echoes the secret: %v", f)
				}
			}
			if !found {
				t.Errorf("unsafe: no %s finding naming gitleaks rule %q; findings %v", tc.rule, tc.gitleaksRule, got)
			}
			for _, f := range CheckUserData(tc.family, tc.safe) {
				if secretRules[f.RuleID] {
					t.Errorf("safe twin: unexpected %v", f)
				}
			}
		})
	}
}

// TestSecretReportedOnce asserts that a credential found both in the raw
// text (by the detector's own base64 pass) and in karpx's decoding of the
// same MIME part is reported once.
func TestSecretReportedOnce(t *testing.T) {
	ud := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\nContent-Transfer-Encoding: base64\n\n" +
		b64s("#!/bin/bash\nexport GITHUB_TOKEN=ghp_R2kq8vD1xY7mZ3pL5nB9cT4wQ6eH0jA2sF8u\n") + "\n--B--\n"
	n := 0
	for _, f := range CheckUserData(al2023, ud) {
		if f.RuleID == RuleUserDataCredential {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("got %d KX012 findings, want 1: %v", n, CheckUserData(al2023, ud))
	}
}

// TestSecretCandidateText asserts that the per-line prefilter keeps line
// numbers and the lines a rule or decoding pass can match on.
func TestSecretCandidateText(t *testing.T) {
	specific, generic, err := secretScanners()
	if err != nil {
		t.Fatal(err)
	}
	in := "echo hello\nexport TOKEN=\nnext-line\nls /tmp\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldY\nurl=a%2Fb\nghp_abc\n"
	got, any, _ := generic.candidateText(in)
	if want := "\nexport TOKEN=\nnext-line\n\n\n\n"; !any || got != want {
		t.Errorf("generic: got %q (%v), want %q", got, any, want)
	}
	got, any, encoded := specific.candidateText(in)
	if want := "\n\n\n\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldY\nurl=a%2Fb\nghp_abc"; !any || !encoded || got != want {
		t.Errorf("specific: got %q (%v, %v), want %q", got, any, encoded, want)
	}
	for _, l := range []string{"mkdir -p /etc/containerd/config.d", "shutdownGracePeriod: 30s", "yum install -y amazon-ssm-agent"} {
		if encodedRun(l) {
			t.Errorf("%q read as an encoded run", l)
		}
	}
	for _, sc := range []*secretScanner{specific, generic} {
		if _, any, _ := sc.candidateText("echo hi\nls -l /tmp\n"); any {
			t.Error("a script with no keyword or encoded run kept a line")
		}
	}
}

func TestIsPlaceholderSecret(t *testing.T) {
	for s, want := range map[string]bool{
		"AKIAIOSFODNN7EXAMPLE": true, "<your-token>": true, "${GITHUB_TOKEN}": true, "changeme123456": true,
		"xxxxxxxxxxxxxxxxxxxx": true, "0000-0000-0000": true, "ghp_R2kq8vD1xY7mZ3pL5nB9cT4wQ6eH0jA2sF8u": false,
	} {
		if got := isPlaceholderSecret(s); got != want {
			t.Errorf("isPlaceholderSecret(%q) = %v, want %v", s, got, want)
		}
	}
}
