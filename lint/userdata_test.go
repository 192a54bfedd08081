package lint

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// got renders findings as "KX003@7" for compact comparison.
func got(fs Findings) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s@%d", f.RuleID, f.Line))
	}
	sort.Strings(out)
	return out
}

const (
	al2023MIME = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      maxPods: 42
    flags:
    - --node-labels=team=a

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo hi
systemctl restart kubelet
--//--
`
)

func TestCheckUserData(t *testing.T) {
	al2, al2023, br, win, custom := apisv1.AMIFamilyAL2, apisv1.AMIFamilyAL2023, apisv1.AMIFamilyBottlerocket, apisv1.AMIFamilyWindows2022, apisv1.AMIFamilyCustom
	cases := []struct {
		name, family, userData string
		want                   []string
	}{
		{"plain shell ok", al2, "#!/bin/bash\necho hello\n", nil},
		{"kubelet restart", al2, "#!/bin/bash\necho a\nsudo systemctl restart kubelet.service\n", []string{"KX003@3"}},
		{"containerd stop after &&", al2023, "#!/bin/bash\nfoo && systemctl --no-block stop containerd\n", []string{"KX003@2"}},
		{"reboot", al2023, "#!/bin/bash\nyum update -y; reboot\n", []string{"KX003@2"}},
		{"shutdown -r", al2, "#!/bin/sh\nshutdown -r now\n", []string{"KX003@2"}},
		{"shutdown cancel is fine", al2, "#!/bin/sh\nshutdown -c\n", nil},
		{"pkill kubelet", al2, "#!/bin/sh\npkill -9 kubelet\n", []string{"KX003@2"}},
		{"service restart", al2, "#!/bin/sh\nservice kubelet restart\n", []string{"KX003@2"}},
		{"comment is fine", al2, "#!/bin/sh\n# systemctl restart kubelet\necho ok # reboot\n", nil},
		{"echo is fine", al2, "#!/bin/sh\necho \"systemctl restart kubelet; reboot\"\n", nil},
		{"daemon-reload is fine", al2, "#!/bin/sh\nsystemctl daemon-reload\nsystemctl restart sshd\nsystemctl enable --now kubelet\n", nil},
		// A download run by a shell is a script karpx cannot read (KX009,
		// docs/rules.md "The principle"); over plain http also KX007.
		{"http pipe", al2, "#!/bin/sh\ncurl -sL http://example.com/x.sh | sudo bash\n", []string{"KX007@2", "KX009@2"}},
		{"https pipe is uninspectable", al2, "#!/bin/sh\ncurl -sL https://example.com/x.sh | bash\n", []string{"KX009@2"}},
		{"proc subst", al2, "#!/bin/sh\nbash <(wget -qO- http://x/y)\n", []string{"KX007@2", "KX009@2"}},
		{"access key", al2, "#!/bin/sh\nexport AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP\n", []string{"KX004@2"}},
		{"secret key", al2, "#!/bin/sh\nexport AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n", []string{"KX005@2"}},
		{"private key", al2023, "#!/bin/sh\ncat > /k <<EOF\n-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\nEOF\n", []string{"KX006@3"}},
		{"al2023 mime nodeconfig + shell", al2023, al2023MIME, []string{"KX003@21", "KX008@12", "KX008@14"}},
		{"al2 mime unterminated", al2, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho hi\n", []string{"KX002@8"}},
		{"al2 mime no blank after part header", al2, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n#!/bin/bash\n--B--\n", []string{"KX002@6"}},
		{"al2 mime no boundary", al2, "MIME-Version: 1.0\nContent-Type: multipart/mixed\n\n--B\n\necho\n--B--\n", []string{"KX002@2"}},
		{"al2 mime boundary never used", al2, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=X\n\n--B\n\necho\n--B--\n", []string{"KX002@2"}},
		{"mime base64 part", al2023, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\nContent-Transfer-Encoding: base64\n\nIyEvYmluL2Jhc2gKcmVib290Cg==\n--B--\n", []string{"KX003@8"}},
		{"bare nodeconfig", al2023, "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: my-cluster\n    apiServerEndpoint: https://x\n", []string{"KX008@5", "KX008@6"}},
		{"bare nodeconfig bad version", al2023, "apiVersion: node.eks.aws/v1beta9\nkind: NodeConfig\n", []string{"KX002@1"}},
		{"bare nodeconfig bad yaml", al2023, "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  instance: [a\n", []string{"KX002@3"}}, // yaml.v3 names the line before the flow sequence
		{"nodeconfig part bad kind", al2023, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: Node\n--B--\n", []string{"KX002@8"}},
		{"bottlerocket ok", br, "[settings.kubernetes]\nimage-gc-high-threshold-percent = 85\n", nil},
		{"bottlerocket owned", br, "[settings.kubernetes]\nmax-pods = 110\ncluster-name = \"x\"\n[settings.kubernetes.node-labels]\nteam = \"a\"\n", []string{"KX008@2", "KX008@3", "KX008@4"}},
		{"bottlerocket dotted owned", br, "settings.kubernetes.api-server = \"https://x\"\n", []string{"KX008@1"}},
		{"bottlerocket bad toml", br, "[settings.kubernetes]\nmax-pods = = 3\n", []string{"KX002@2"}},
		{"bottlerocket reboot text not a script", br, "[settings.host-containers.admin]\nenabled = true\n# reboot\n", nil},
		{"windows ok", win, "New-Item -Path 'C:\\temp\\' -ItemType Directory\n", nil},
		{"windows tagged ok", win, "<powershell>\nWrite-Host hi\n</powershell>\n", nil},
		{"windows unclosed", win, "<powershell>\nWrite-Host hi\n", []string{"KX002@1"}},
		{"windows restart kubelet", win, "<powershell>\nRestart-Service -Name kubelet\n</powershell>\n", []string{"KX003@2"}},
		{"windows restart computer", win, "Restart-Computer -Force\n", []string{"KX003@1"}},
		{"windows spsv alias", win, "spsv kubelet -Force\n", []string{"KX003@1"}},
		{"windows kill alias", win, "Get-Process kubelet | kill\n", []string{"KX003@1"}},
		{"windows taskkill", win, "taskkill /IM containerd.exe /F\n", []string{"KX003@1"}},
		{"windows kill other process", win, "Get-Process notepad | Stop-Process\n", nil},
		{"windows wmi reboot", win, "(Get-WmiObject Win32_OperatingSystem).Reboot()\n", []string{"KX003@1"}},
		{"windows cim reboot", win, "Invoke-CimMethod -ClassName Win32_OperatingSystem -MethodName Reboot\n", []string{"KX003@1"}},
		{"windows wmi shutdown", win, "(gwmi win32_operatingsystem -EnableAllPrivileges).Win32Shutdown(6)\n", []string{"KX003@1"}},
		{"windows cim stop service", win, "Get-CimInstance Win32_Service -Filter \"Name='kubelet'\" | Invoke-CimMethod -MethodName StopService\n", []string{"KX003@1"}},
		{"windows wmi query only", win, "(Get-CimInstance Win32_OperatingSystem).LastBootUpTime\n", nil},
		{"windows block comment", win, "<#\nRestart-Computer -Force\n#>\nWrite-Host ok\n", nil},
		{"windows block comment then code", win, "<# note #> Restart-Computer\n", []string{"KX003@1"}},
		{"windows block comment in a string", win, "Write-Host '<#'\nRestart-Computer\nWrite-Host '#>'\n", []string{"KX003@2"}},
		{"windows block comment after a line comment", win, "# <#\nRestart-Computer\n# #>\n", []string{"KX003@2"}},
		{"windows subexpression string", win, "Write-Host \"$(\"<#\")\"\nRestart-Computer\n#>\n", []string{"KX003@2"}},
		{"windows iex http", win, "iex ((New-Object Net.WebClient).DownloadString('http://x/y.ps1'))\n", []string{"KX007@1"}},
		{"custom unterminated mime is fine", custom, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\n#!/bin/bash\n/etc/eks/bootstrap.sh c --kubelet-extra-args='--node-labels=a=b'\n", nil},
		{"custom reboot", custom, "#!/bin/bash\nreboot\n", []string{"KX003@2"}},
		{"cloud-config runcmd", al2023, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/cloud-config\n\nruncmd:\n- [systemctl, restart, containerd]\n--B--\n", []string{"KX003@8"}},
		{"too big", al2, "#!/bin/bash\n" + strings.Repeat("# padding\n", 2000), []string{"KX001@0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := CheckUserData(c.family, c.userData)
			g := got(fs)
			if strings.Join(g, ",") != strings.Join(c.want, ",") {
				for _, f := range fs {
					t.Logf("  %s", f)
				}
				t.Fatalf("got %v, want %v", g, c.want)
			}
			for _, f := range fs {
				if f.Fix == "" || f.Message == "" || f.Field != "spec.userData" {
					t.Errorf("incomplete finding %+v", f)
				}
				if w := f.Warning(); len(w) > MaxWarningLength {
					t.Errorf("warning longer than %d: %q", MaxWarningLength, w)
				}
			}
		})
	}
}

func TestSecretsNotEchoed(t *testing.T) {
	fs := CheckUserData(apisv1.AMIFamilyAL2, "#!/bin/sh\nexport K=AKIAABCDEFGHIJKLMNOP\n")
	for _, f := range fs {
		if strings.Contains(f.String(), "ABCDEFGHIJKLMNOP") {
			t.Fatalf("finding echoes the key: %s", f)
		}
	}
}

func TestRatchet(t *testing.T) {
	old := CheckUserData(apisv1.AMIFamilyAL2, "#!/bin/sh\nreboot\n")
	cur := CheckUserData(apisv1.AMIFamilyAL2, "#!/bin/sh\nreboot\n")
	if r := Ratchet(cur, old); r.Denied() {
		t.Fatalf("unchanged denial not ratcheted: %v", r)
	}
	cur = CheckUserData(apisv1.AMIFamilyAL2, "#!/bin/sh\necho\nreboot\n")
	if r := Ratchet(cur, old); !r.Denied() {
		t.Fatalf("new denial ratcheted away: %v", r)
	}
}

func TestRulesTable(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Rules() {
		if seen[r.ID] || r.Name == "" || r.Summary == "" || r.Source == "" || (r.Severity != SeverityDeny && r.Severity != SeverityWarning) {
			t.Errorf("bad rule %+v", r)
		}
		seen[r.ID] = true
	}
}

func TestWarningLength(t *testing.T) {
	f := Finding{RuleID: "KX008", Field: "spec.userData", Line: 12345, Message: strings.Repeat("é", 200), Fix: "x"}
	if w := f.Warning(); len(w) > MaxWarningLength || !strings.HasSuffix(w, "…") {
		t.Fatalf("bad warning %q (%d)", w, len(w))
	}
}
