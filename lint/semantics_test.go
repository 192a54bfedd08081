package lint

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"testing"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// mechanism is one way userData can do something a rule denies, with a
// near-identical form that must be admitted (an echo or comment with the
// same words, another service, a harmless file).
type mechanism struct {
	name         string
	family       string
	unsafe, safe string
	rule         string
	// diff: both scripts are plain shell that the differential check
	// (TestShellDifferential) runs through mvdan.cc/sh/v3/interp.
	diff bool
}

const sh = "#!/bin/bash\nset -euo pipefail\n"

// ccMIME wraps a cloud-config body in an AL2023 MIME document, as
// operators write it next to a NodeConfig.
func ccMIME(body string) string {
	return "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/cloud-config; charset=\"us-ascii\"\n\n" + body + "\n--BOUNDARY--\n"
}

func b64s(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func gzb64(s string) string {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(s))
	zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

var al2023 = apisv1.AMIFamilyAL2023

func shellMech(name, unsafe, safe string) mechanism {
	return mechanism{name: name, family: al2023, unsafe: sh + unsafe + "\n", safe: sh + safe + "\n", rule: RuleUserDataNodeRestart, diff: true}
}

var mechanisms = []mechanism{
	// Rebooting, powering off, halting, kexec.
	shellMech("reboot binary", "yum update -y && reboot", "yum update -y && echo reboot"),
	shellMech("poweroff path", "/sbin/poweroff -f", "# /sbin/poweroff -f\necho done"),
	shellMech("halt", "halt -p", "halt -w"),
	shellMech("shutdown -r +1", "shutdown -r +1 'kernel update'", "shutdown -c 'kernel update'"),
	shellMech("shutdown now", "shutdown now", "echo shutdown now"),
	shellMech("shutdown -h at time", "shutdown -h 23:00", "shutdown -k 23:00"),
	shellMech("kexec", "kexec -e", "kexec -l /boot/vmlinuz --initrd=/boot/initrd.img"),
	shellMech("systemctl reboot", "systemctl --no-block reboot", "systemctl --no-block daemon-reload"),
	shellMech("systemctl kexec", "systemctl kexec", "systemctl status"),
	shellMech("systemctl isolate reboot.target", "systemctl isolate reboot.target", "systemctl isolate multi-user.target"),
	shellMech("systemctl start poweroff.target", "systemctl start poweroff.target", "systemctl start amazon-ssm-agent.service"),
	shellMech("sysrq-trigger", "echo 1 > /proc/sys/kernel/sysrq\necho b > /proc/sysrq-trigger", "echo 1 > /proc/sys/kernel/sysrq\necho b > /tmp/sysrq-trigger"),
	shellMech("sysrq via tee", "echo o | tee /proc/sysrq-trigger", "echo o | tee /tmp/sysrq-note"),
	shellMech("telinit 6", "telinit 6", "telinit q"),
	shellMech("init 0", "init 0", "echo init 0"),
	shellMech("at from echo", "echo reboot | at now + 1 minute", "echo 'echo reboot' | at now + 1 minute"),
	shellMech("at from here-document", "at now + 5 minutes <<EOF\nsystemctl restart kubelet\nEOF", "at now + 5 minutes <<EOF\nsystemctl restart chronyd\nEOF"),
	shellMech("sleep in background", "(sleep 60 && reboot) &", "(sleep 60 && echo reboot) &"),
	shellMech("nohup sh -c", "nohup sh -c 'sleep 30; systemctl restart kubelet' >/dev/null 2>&1 &", "nohup sh -c 'sleep 30; systemctl restart sshd' >/dev/null 2>&1 &"),
	shellMech("systemd-run timer", "systemd-run --on-active=120 /sbin/reboot", "systemd-run --on-active=120 /usr/bin/true"),
	shellMech("busctl logind", "busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager Reboot b false", "busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager ListSessions"),
	shellMech("backslash-escaped name", `\reboot`, `echo \reboot`),

	// Stopping, killing, masking, disabling, restarting kubelet or containerd.
	shellMech("sh -c quoted", `sh -c "systemctl stop containerd"`, `sh -c "systemctl status containerd"`),
	shellMech("bash -lc nested sudo", "bash -lc 'sudo systemctl restart kubelet.service'", "bash -lc 'sudo systemctl restart sshd.service'"),
	shellMech("service name in a variable", "SVC=kubelet\nsystemctl restart \"$SVC\"", "SVC=chronyd\nsystemctl restart \"$SVC\""),
	shellMech("name built from variables", "A=kube\nB=${A}let\nsystemctl stop $B", "A=kube\nB=${A}-proxy-helper\nsystemctl stop $B"),
	shellMech("default expansion", "systemctl restart ${UNIT:-containerd}", "systemctl restart ${UNIT:-crond}"),
	shellMech("for loop", "for s in containerd kubelet; do systemctl restart $s; done", "for s in chronyd sshd; do systemctl restart $s; done"),
	shellMech("systemctl flags and suffix", "systemctl -q --no-block try-restart containerd.service", "systemctl -q --no-block try-restart crond.service"),
	shellMech("systemctl mask", "systemctl mask --now kubelet", "systemctl unmask kubelet"),
	shellMech("systemctl disable", "systemctl disable kubelet.service", "systemctl enable kubelet.service"),
	shellMech("systemctl glob", "systemctl restart 'kube*'", "systemctl restart 'chrony*'"),
	shellMech("systemctl kill", "systemctl kill -s SIGKILL kubelet", "systemctl kill -s SIGKILL chronyd"),
	shellMech("service", "service containerd restart", "service containerd status"),
	shellMech("init.d script", "/etc/init.d/containerd restart", "/etc/init.d/containerd status"),
	shellMech("pkill -f", "pkill -f containerd", "pgrep -f containerd"),
	shellMech("pkill regex", "pkill 'kube.*'", "pkill chronyd"),
	shellMech("killall", "killall -9 kubelet", "killall -9 kubelet-eks-helper"),
	shellMech("kill $(pidof)", "kill -9 $(pidof kubelet)", "kill -0 $(pidof kubelet)"),
	shellMech("PID in a variable", "PID=$(pgrep containerd)\nkill $PID", "PID=$(pgrep containerd)\necho $PID"),
	shellMech("pidof | xargs kill", "pidof kubelet | xargs kill", "pidof kubelet | xargs echo"),
	shellMech("eval literal", "eval 'systemctl restart kubelet'", "eval 'systemctl restart sshd'"),
	shellMech("command substitution", "echo $(systemctl restart kubelet)", "echo $(systemctl is-active kubelet)"),
	shellMech("here-document to bash", "bash <<'EOF'\nsystemctl stop kubelet\nEOF", "cat <<'EOF'\nsystemctl stop kubelet\nEOF"),
	shellMech("here-string to bash", "bash <<< 'reboot'", "cat <<< 'reboot'"),
	shellMech("echo | sh", "echo 'shutdown -r now' | sh", "echo 'shutdown -r now' | tee /tmp/note"),
	shellMech("sudo env prefix", "sudo -E env FOO=1 systemctl restart containerd", "sudo -E env FOO=1 systemctl restart crond"),
	shellMech("command held in a variable", "CMD=\"systemctl restart kubelet\"\n$CMD", "CMD=\"systemctl restart kubelet\"\necho $CMD"),
	shellMech("name from $(echo)", "systemctl stop $(echo containerd)", "systemctl stop $(echo crond)"),
	shellMech("function body", "bounce() { systemctl restart kubelet; }\nbounce", "bounce() { systemctl restart sshd; }\nbounce"),
	{name: "cron line written by echo", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: sh + "echo '@reboot root systemctl restart kubelet' > /etc/cron.d/bounce\n",
		safe:   sh + "echo '@reboot root systemctl restart kubelet' > /tmp/cron-note\n"},
	{name: "systemd unit written by cat", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: sh + "cat > /etc/systemd/system/once.service <<'EOF'\n[Service]\nType=oneshot\nExecStart=/sbin/reboot\nEOF\n",
		safe:   sh + "cat > /etc/systemd/system/once.service <<'EOF'\n[Service]\nType=oneshot\nExecStart=/usr/bin/true\nEOF\n"},

	// Plain-http downloads run by a shell.
	{name: "sh -c of curl http", family: al2023, rule: RuleUserDataHTTPPipe, diff: false,
		unsafe: sh + "sh -c \"$(curl -fsSL http://example.com/install.sh)\"\n",
		safe:   sh + "curl -fsSL https://example.com/install.conf -o /etc/install.conf\n"},
	{name: "curl http | sudo bash -s", family: al2023, rule: RuleUserDataHTTPPipe,
		unsafe: sh + "curl -fsSL http://example.com/i.sh | sudo bash -s -- --flag\n",
		safe:   sh + "curl -fsSL http://example.com/i.sh -o /tmp/i.sh\n"},

	// Scripts that do not parse.
	{name: "unterminated if", family: al2023, rule: RuleUserDataParse,
		unsafe: sh + "if [ -f /etc/x ]; then\n  echo yes\n", safe: sh + "if [ -f /etc/x ]; then\n  echo yes\nfi\n"},
	{name: "unterminated quote in sh -c", family: al2023, rule: RuleUserDataParse,
		unsafe: sh + "sh -c 'echo \"unterminated'\n", safe: sh + "sh -c 'echo \"terminated\"'\n"},

	// cloud-config modules.
	{name: "runcmd string", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\nruncmd:\n  - systemctl restart containerd"),
		safe:   ccMIME("#cloud-config\nruncmd:\n  - systemctl restart chronyd")},
	{name: "runcmd list with sh -c", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\nruncmd:\n  - [sh, -c, 'sleep 5; reboot']"),
		safe:   ccMIME("#cloud-config\nruncmd:\n  - [sh, -c, 'sleep 5; echo reboot']")},
	{name: "runcmd block scalar", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\nruncmd:\n  - |\n    SVC=kubelet\n    systemctl restart $SVC"),
		safe:   ccMIME("#cloud-config\nruncmd:\n  - |\n    SVC=kubelet\n    systemctl status $SVC")},
	{name: "bootcmd cloud-init-per", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\nbootcmd:\n  - [cloud-init-per, once, stopk, systemctl, stop, kubelet]"),
		safe:   ccMIME("#cloud-config\nbootcmd:\n  - [cloud-init-per, once, mkdirk, mkdir, -p, /etc/kubelet.d]")},
	{name: "power_state reboot", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\npower_state:\n  mode: reboot\n  delay: now\n  message: applying kernel args"),
		safe:   ccMIME("#cloud-config\npower_state:\n  mode: reboot\n  delay: now\n  condition: false")},
	{name: "power_state poweroff", family: apisv1.AMIFamilyCustom, rule: RuleUserDataNodeRestart,
		unsafe: "#cloud-config\npower_state:\n  mode: poweroff\n", safe: "#cloud-config\n# power_state:\n#   mode: poweroff\n"},
	{name: "package_reboot_if_required", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\npackage_upgrade: true\npackage_reboot_if_required: true"),
		safe:   ccMIME("#cloud-config\npackage_upgrade: true\npackage_reboot_if_required: false")},
	{name: "write_files b64 secret", family: al2023, rule: RuleUserDataSecretKey,
		unsafe: ccMIME("#cloud-config\nwrite_files:\n  - path: /root/.aws/credentials\n    encoding: b64\n    content: " + b64s("[default]\naws_secret_access_key = "+exampleSecret+"\n")),
		safe:   ccMIME("#cloud-config\nwrite_files:\n  - path: /root/.aws/config\n    encoding: b64\n    content: " + b64s("[default]\nregion = us-west-2\n"))},
	{name: "write_files gz+b64 access key", family: al2023, rule: RuleUserDataAccessKey,
		unsafe: ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/app.env\n    encoding: gz+b64\n    content: " + gzb64("AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP\n")),
		safe:   ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/app.env\n    encoding: gz+b64\n    content: " + gzb64("AWS_REGION=us-west-2\n"))},
	{name: "write_files gzip systemd unit", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/systemd/system/tune.service\n    encoding: gzip+base64\n    content: " + gzb64("[Service]\nExecStartPost=/bin/systemctl restart containerd\n")),
		safe:   ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/systemd/system/tune.service\n    encoding: gzip+base64\n    content: " + gzb64("[Service]\nExecStartPost=/bin/systemctl restart chronyd\n"))},
	{name: "write_files kubelet drop-in", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/systemd/system/kubelet.service.d/90-x.conf\n    content: |\n      [Service]\n      ExecStartPost=-/usr/bin/pkill -HUP containerd"),
		safe:   ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/systemd/system/kubelet.service.d/90-x.conf\n    content: |\n      [Service]\n      Environment=KUBELET_EXTRA=1")},
	{name: "write_files cron", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/cron.d/nightly\n    content: \"0 3 * * * root /sbin/shutdown -r now\\n\""),
		safe:   ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/motd\n    content: \"0 3 * * * root /sbin/shutdown -r now\\n\"")},
	{name: "write_files per-boot script", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\nwrite_files:\n  - path: /var/lib/cloud/scripts/per-boot/10-bounce.sh\n    permissions: '0755'\n    content: |\n      #!/bin/sh\n      systemctl restart kubelet"),
		safe:   ccMIME("#cloud-config\nwrite_files:\n  - path: /opt/scripts/10-bounce.sh\n    permissions: '0755'\n    content: |\n      #!/bin/sh\n      systemctl restart kubelet")},
	{name: "write_files rc.local", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/rc.local\n    content: |\n      systemctl stop containerd"),
		safe:   ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/rc.local\n    content: |\n      systemctl start containerd")},
	{name: "write_files profile.d", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/profile.d/k.sh\n    content: |\n      pkill kubelet"),
		safe:   ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/profile.d/k.sh\n    content: |\n      alias k=kubectl")},
	{name: "write_files undecodable", family: al2023, rule: RuleUserDataUninspectable,
		unsafe: ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/x\n    encoding: b64\n    content: '%%%not-base64'"),
		safe:   ccMIME("#cloud-config\nwrite_files:\n  - path: /etc/x\n    encoding: b64\n    content: " + b64s("x=1\n"))},
	{name: "ssh_authorized_keys private key", family: al2023, rule: RuleUserDataPrivateKey,
		unsafe: ccMIME("#cloud-config\nusers:\n  - name: ops\n    ssh_authorized_keys:\n      - \"-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXk= -----END OPENSSH PRIVATE KEY-----\""),
		safe:   ccMIME("#cloud-config\nusers:\n  - name: ops\n    ssh_authorized_keys:\n      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@example")},
	{name: "#include", family: apisv1.AMIFamilyCustom, rule: RuleUserDataUninspectable,
		unsafe: "#include\nhttps://example.com/more-userdata.txt\n", safe: "#cloud-config\n# more: https://example.com/more-userdata.txt\n"},
	{name: "#include-once part", family: al2023, rule: RuleUserDataUninspectable,
		unsafe: "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-include-once-url\n\nhttps://example.com/boot.sh\n--B--\n",
		safe:   "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n# https://example.com/boot.sh\n--B--\n"},
	{name: "#part-handler", family: apisv1.AMIFamilyCustom, rule: RuleUserDataUninspectable,
		unsafe: "#part-handler\ndef list_types():\n    return ['text/x-x']\n", safe: "#!/bin/sh\n# part-handler list_types\n"},
	{name: "#cloud-config-archive", family: apisv1.AMIFamilyCustom, rule: RuleUserDataNodeRestart,
		unsafe: "#cloud-config-archive\n- type: text/cloud-config\n  content: |\n    runcmd:\n      - systemctl restart kubelet\n",
		safe:   "#cloud-config-archive\n- type: text/cloud-config\n  content: |\n    runcmd:\n      - systemctl status kubelet\n"},
	{name: "cloud-boothook part", family: al2023, rule: RuleUserDataNodeRestart,
		unsafe: "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/cloud-boothook\n\n#cloud-boothook\n#!/bin/sh\ncloud-init-per once bounce systemctl restart containerd\n--B--\n",
		safe:   "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/cloud-boothook\n\n#cloud-boothook\n#!/bin/sh\ncloud-init-per once docker_opts echo 'OPTIONS=x' >> /etc/sysconfig/docker\n--B--\n"},
	{name: "non-shell interpreter", family: al2023, rule: RuleUserDataUninspectable,
		unsafe: "#!/usr/bin/python3\nimport os\nos.system('reboot')\n", safe: "#!/bin/bash\n# python3 -c 'import os'\n"},
	{name: "cloud-config that is not YAML", family: al2023, rule: RuleUserDataParse,
		unsafe: ccMIME("#cloud-config\nruncmd:\n  - [unclosed"), safe: ccMIME("#cloud-config\nruncmd:\n  - [closed]")},
}

// TestMechanisms: every unsafe form is found by its rule and every safe
// twin is admitted with no finding of any rule.
func TestMechanisms(t *testing.T) {
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			un := CheckUserData(m.family, m.unsafe)
			if !hasRule(un, m.rule) {
				t.Errorf("unsafe form not caught by %s; findings: %v", m.rule, un)
			}
			if severityOf(m.rule) == SeverityDeny && !un.Denied() {
				t.Errorf("unsafe form admitted: %v", un)
			}
			if s := CheckUserData(m.family, m.safe); len(s) != 0 {
				t.Errorf("safe form has findings: %v", s)
			}
		})
	}
}

// TestShellParseErrorPosition: KX002 names the line and column of the
// syntax error in userData coordinates.
func TestShellParseErrorPosition(t *testing.T) {
	fs := CheckUserData(al2023, "#!/bin/bash\necho ok\necho \"unterminated\n")
	if len(fs) != 1 || fs[0].RuleID != RuleUserDataParse || fs[0].Line != 3 || !strings.Contains(fs[0].Message, "column 6") {
		t.Fatalf("got %v, want one KX002 at line 3 column 6", fs)
	}
	// Inside a MIME part, lines are userData lines.
	doc := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\n#!/bin/sh\nfor x in a b; do\n--B--\n"
	fs = CheckUserData(al2023, doc)
	if len(fs) != 1 || fs[0].RuleID != RuleUserDataParse || fs[0].Line != 8 {
		t.Fatalf("got %v, want one KX002 at line 8", fs)
	}
}

// --- Differential check against the shell interpreter ---

// interpEffects runs script in mvdan.cc/sh/v3/interp with every external
// command, file open and kill intercepted (nothing runs, nothing is
// written) and returns what the executed command lines do, judged on the
// interpreter's fully expanded argv.
func interpEffects(t *testing.T, script string) []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	pids := map[string]string{"4242": "kubelet", "4343": "containerd"}
	record := func(argv []string) {
		if len(argv) == 0 {
			return
		}
		as := make([]arg, len(argv))
		for i, v := range argv {
			as[i] = arg{vals: []string{v}, pid: pids[v]}
		}
		as = unwrap(as)
		if len(as) == 0 {
			return
		}
		if what := restartWhat(path.Base(as[0].first()), as[1:]); what != "" {
			mu.Lock()
			got = append(got, what)
			mu.Unlock()
		}
	}
	var run func(ctx context.Context, src string, stdin io.Reader, depth int)
	files := map[string]*bytes.Buffer{}
	open := func(_ context.Context, p string, flag int, _ os.FileMode) (io.ReadWriteCloser, error) {
		mu.Lock()
		defer mu.Unlock()
		if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
			return nopRWC{Reader: strings.NewReader("")}, nil
		}
		b := &bytes.Buffer{}
		files[p] = b
		return nopRWC{Writer: b}, nil
	}
	exec := func(depth int) func(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
		return func(interp.ExecHandlerFunc) interp.ExecHandlerFunc {
			return func(ctx context.Context, argv []string) error {
				hc := interp.HandlerCtx(ctx)
				inner := make([]arg, len(argv))
				for i, v := range argv {
					inner[i] = arg{vals: []string{v}}
				}
				in := unwrapNoXargs(inner)
				if len(in) == 0 {
					return nil
				}
				cmd := make([]string, len(in))
				for i, a := range in {
					cmd[i] = a.first()
				}
				switch name := path.Base(cmd[0]); {
				case shells[name]:
					for i, a := range cmd[1:] {
						if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.HasSuffix(a, "c") && i+2 < len(cmd) {
							run(ctx, cmd[i+2], hc.Stdin, depth+1)
							return nil
						}
					}
					run(ctx, readAll(hc.Stdin), nil, depth+1)
				case name == "at" || name == "batch":
					run(ctx, readAll(hc.Stdin), nil, depth+1)
				case name == "cat":
					io.Copy(hc.Stdout, hc.Stdin)
				case name == "tee":
					text := readAll(hc.Stdin)
					for _, f := range cmd[1:] {
						if !strings.HasPrefix(f, "-") {
							mu.Lock()
							files[f] = bytes.NewBufferString(text)
							mu.Unlock()
						}
					}
				case name == "pidof" || name == "pgrep":
					for pid, agent := range pids {
						for _, a := range cmd[1:] {
							if strings.Contains(a, agent) {
								fmt.Fprintln(hc.Stdout, pid)
							}
						}
					}
				case name == "xargs":
					extra := strings.Fields(readAll(hc.Stdin))
					rest := unwrap(in)
					full := []string{}
					for _, a := range rest {
						full = append(full, a.first())
					}
					record(append(full, extra...))
				default:
					record(cmd)
				}
				return nil
			}
		}
	}
	run = func(ctx context.Context, src string, stdin io.Reader, depth int) {
		if depth > 4 {
			return
		}
		f, err := syntax.NewParser().Parse(strings.NewReader(src+"\nwait\n"), "")
		if err != nil {
			return
		}
		r, err := interp.New(
			interp.StdIO(stdin, io.Discard, io.Discard),
			interp.ExecHandlers(exec(depth)),
			interp.OpenHandler(open),
			interp.CallHandler(func(ctx context.Context, args []string) ([]string, error) {
				if args[0] == "kill" { // a builtin: record, never signal
					record(args)
					return []string{":"}, nil
				}
				return args, nil
			}),
		)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Run(ctx, f)
	}
	run(context.Background(), script, nil, 0)
	mu.Lock()
	defer mu.Unlock()
	for p, b := range files {
		if p == sysrqTrigger && sysrqDangerous(b.String()) {
			got = append(got, "write to "+sysrqTrigger)
		}
	}
	return got
}

type nopRWC struct {
	io.Reader
	io.Writer
}

func (n nopRWC) Read(p []byte) (int, error) {
	if n.Reader == nil {
		return 0, io.EOF
	}
	return n.Reader.Read(p)
}

func (n nopRWC) Write(p []byte) (int, error) {
	if n.Writer == nil {
		return len(p), nil
	}
	return n.Writer.Write(p)
}

func (nopRWC) Close() error { return nil }

func readAll(r io.Reader) string {
	if r == nil {
		return ""
	}
	b, _ := io.ReadAll(r)
	return string(b)
}

// TestShellDifferential compares karpx's static verdict (KX003 or not)
// with what the shell interpreter actually executes for every plain-shell
// case above: they must agree on every unsafe and every safe form.
func TestShellDifferential(t *testing.T) {
	for _, m := range mechanisms {
		if !m.diff {
			continue
		}
		for _, form := range []struct{ label, text string }{{"unsafe", m.unsafe}, {"safe", m.safe}} {
			t.Run(m.name+"/"+form.label, func(t *testing.T) {
				// set -e would stop at the first failing stub; the
				// interpreter must see every command.
				script := strings.Replace(form.text, "set -euo pipefail\n", "", 1)
				ran := interpEffects(t, script)
				static := hasRule(CheckUserData(m.family, form.text), RuleUserDataNodeRestart)
				if static != (len(ran) > 0) {
					t.Errorf("karpx says KX003=%v, the interpreter ran %q", static, ran)
				}
			})
		}
	}
}

// TestProviderUserData: userData shaped like the Karpenter AWS provider's
// own test inputs (testdata/provider-userdata/SOURCE.md) has no finding.
func TestProviderUserData(t *testing.T) {
	cases := map[string]string{
		"al2-bootstrap-mime.txt":     apisv1.AMIFamilyAL2,
		"al2-content-type-first.txt": apisv1.AMIFamilyAL2,
		"al2023-mime.txt":            apisv1.AMIFamilyAL2023,
		"al2023-shell.txt":           apisv1.AMIFamilyAL2023,
		"al2023-nodeconfig.yaml":     apisv1.AMIFamilyAL2023,
		"bottlerocket.toml":          apisv1.AMIFamilyBottlerocket,
		"windows.ps1":                apisv1.AMIFamilyWindows2022,
	}
	for file, family := range cases {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile("testdata/provider-userdata/" + file)
			if err != nil {
				t.Fatal(err)
			}
			if fs := CheckUserData(family, string(b)); len(fs) != 0 {
				t.Errorf("findings on provider-style userData: %v", fs)
			}
		})
	}
}
