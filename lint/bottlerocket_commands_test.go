package lint

import (
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// Bottlerocket's bootstrap commands are judged as what they run; mode
// "off" never runs.
func TestBottlerocketBootstrapCommands(t *testing.T) {
	cmd := func(commands, mode string) string {
		s := "[settings.bootstrap-commands.prep]\ncommands = " + commands + "\nessential = true\n"
		if mode != "" {
			s += "mode = \"" + mode + "\"\n"
		}
		return s
	}
	for _, c := range []struct {
		name, text, want string // want "" admitted
	}{
		{"apiclient reboot", cmd(`[["apiclient", "reboot"]]`, "always"), RuleUserDataNodeRestart},
		{"apiclient reboot once", cmd(`[["apiclient", "ephemeral-storage", "init"], ["apiclient", "reboot"]]`, "once"), RuleUserDataNodeRestart},
		{"apiclient reboot no mode", cmd(`[["/usr/bin/apiclient", "--log-level", "info", "reboot"]]`, ""), RuleUserDataNodeRestart},
		{"apiclient reboot off", cmd(`[["apiclient", "reboot"]]`, "off"), ""},
		{"update with reboot", cmd(`[["apiclient", "update", "apply", "--reboot"]]`, "always"), RuleUserDataNodeRestart},
		{"update without reboot", cmd(`[["apiclient", "update", "check"]]`, "always"), ""},
		{"raw reboot action", cmd(`[["apiclient", "raw", "-m", "POST", "-u", "/actions/reboot"]]`, "always"), RuleUserDataNodeRestart},
		{"raw settings", cmd(`[["apiclient", "raw", "-u", "/settings"]]`, "always"), ""},
		{"ephemeral storage", cmd(`[["apiclient", "ephemeral-storage", "init"], ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]]`, "always"), ""},
		{"exec stops kubelet", cmd(`[["apiclient", "exec", "admin", "systemctl", "stop", "kubelet"]]`, "always"), RuleUserDataNodeRestart},
		{"exec shell script", cmd(`[["apiclient", "exec", "admin", "sh", "-c", "x=reb; ${x}oot"]]`, "always"), RuleUserDataNodeRestart},
		{"exec shell script safe", cmd(`[["apiclient", "exec", "admin", "sh", "-c", "x=host; ${x}name"]]`, "always"), ""},
		{"argv not apiclient", cmd(`[["systemctl", "kill", "containerd"]]`, "always"), RuleUserDataNodeRestart},
		{"argv not apiclient safe", cmd(`[["systemctl", "restart", "chronyd"]]`, "always"), ""},
		{"shell argv", cmd(`[["/bin/sh", "-c", "echo cmVib290 | base64 -d | sh"]]`, "always"), RuleUserDataNodeRestart},
		{"shell argv outside", cmd(`[["/bin/sh", "-c", "$(curl -s https://example.com/cmd)"]]`, "always"), RuleUserDataUninspectable},
		{"not argv lists", cmd(`["apiclient reboot"]`, "always"), RuleUserDataUninspectable},
		{"not a list", cmd(`"apiclient reboot"`, "always"), RuleUserDataUninspectable},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := CheckUserData(apisv1.AMIFamilyBottlerocket, c.text)
			if c.want == "" {
				if fs.Denied() {
					t.Fatalf("denied: %v", fs)
				}
				return
			}
			if !hasRule(fs.Denials(), c.want) {
				t.Fatalf("want a %s denial, got %v", c.want, fs)
			}
		})
	}
}
