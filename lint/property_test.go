package lint

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// safeLines are the commands the random safe scripts are made of: what
// real bootstrap scripts do (packages, files, sysctls, variables, loops,
// functions, conditions on the outside world).
var safeLines = []string{
	"yum install -y amazon-ssm-agent jq",
	"mkdir -p /etc/myapp /var/lib/myapp",
	"echo 'vm.max_map_count=262144' > /etc/sysctl.d/99-app.conf",
	"sysctl --system",
	"export HTTPS_PROXY=http://proxy.internal:3128",
	"REGION=$(curl -s http://169.254.169.254/latest/meta-data/placement/region)",
	"echo \"region=$REGION\" >> /etc/myapp/env",
	"for d in nvme1n1 nvme2n1; do echo \"$d\" >> /var/lib/myapp/disks; done",
	"log() { echo \"$(date) $*\" >> /var/log/bootstrap.log; }",
	"log starting",
	"if [ -f /etc/eks/bootstrap.sh ]; then echo found > /tmp/found; fi",
	"systemctl enable --now amazon-ssm-agent",
	"cat <<'EOF' > /etc/myapp/app.conf\nlisten = 8080\nEOF",
	"chmod 0644 /etc/myapp/app.conf",
	"aws s3 cp s3://my-bucket/config.json /etc/myapp/config.json",
	"sed -i 's/^#MaxAuthTries.*/MaxAuthTries 3/' /etc/ssh/sshd_config",
	"echo \"$(hostname) ready\" | tee -a /var/log/ready",
	"modprobe br_netfilter",
	"[ -d /mnt/data ] || mkdir /mnt/data",
	"grep -q swap /etc/fstab && swapoff -a",
}

// forbidden are commands KX003 denies.
var forbidden = []string{
	"reboot",
	"shutdown -r now",
	"systemctl stop kubelet",
	"systemctl restart containerd",
	"poweroff",
	"halt -f",
	"pkill kubelet",
	"systemctl mask kubelet",
}

func gzipBytes(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.Bytes()
}

// splice is a route by which a script runs cmd.
type splice struct {
	name string
	// lines returns the lines that run cmd; r varies names and forms.
	lines func(r *rand.Rand, cmd string) string
}

// quoteWord spells word with quotes the shell removes.
func quoteWord(r *rand.Rand, word string) string {
	var b strings.Builder
	for i, c := range word {
		switch r.IntN(4) {
		case 0:
			fmt.Fprintf(&b, "'%c'", c)
		case 1:
			fmt.Fprintf(&b, "\"%c\"", c)
		case 2:
			if i > 0 {
				fmt.Fprintf(&b, "\\%c", c)
			} else {
				b.WriteRune(c)
			}
		default:
			fmt.Fprintf(&b, "$'\\x%02x'", c)
		}
	}
	return b.String()
}

func quoteAll(r *rand.Rand, cmd string) string {
	f := strings.Fields(cmd)
	for i := range f {
		f[i] = quoteWord(r, f[i])
	}
	return strings.Join(f, " ")
}

var splices = []splice{
	{"plain", func(_ *rand.Rand, c string) string { return c }},
	{"quoted", quoteAll},
	{"sudo and quoted", func(r *rand.Rand, c string) string { return "sudo " + quoteAll(r, c) }},
	{"command substitution", func(_ *rand.Rand, c string) string { return "$(echo " + c + ")" }},
	{"backquotes with printf", func(_ *rand.Rand, c string) string { return "`printf '%s' '" + c + "'`" }},
	{"variable", func(_ *rand.Rand, c string) string { return "CMD='" + c + "'\n$CMD" }},
	{"split variables", func(_ *rand.Rand, c string) string {
		h := len(c) / 2
		return "a='" + c[:h] + "'; b='" + c[h:] + "'\neval \"$a$b\""
	}},
	{"function", func(_ *rand.Rand, c string) string { return "run() { \"$@\"; }\nrun " + c }},
	{"sh -c", func(_ *rand.Rand, c string) string { return "bash -c '" + c + "'" }},
	{"written then run", func(r *rand.Rand, c string) string {
		p := fmt.Sprintf("/usr/local/bin/step%d.sh", r.IntN(100))
		return "cat > " + p + " <<'EOF'\n#!/bin/bash\n" + c + "\nEOF\nchmod +x " + p + "\n" + p
	}},
	{"written then sourced", func(r *rand.Rand, c string) string {
		p := fmt.Sprintf("/tmp/lib%d.sh", r.IntN(100))
		return "echo '" + c + "' > " + p + "\n. " + p
	}},
	{"written, copied, run", func(_ *rand.Rand, c string) string {
		return "printf '%s\\n' '" + c + "' > /tmp/a\ncp /tmp/a /opt/b.sh\nsh /opt/b.sh"
	}},
	{"base64 into a shell", func(_ *rand.Rand, c string) string { return "echo " + enc64([]byte(c)) + " | base64 -d | bash" }},
	{"base64 into eval", func(_ *rand.Rand, c string) string {
		return "eval \"$(echo " + enc64([]byte(c)) + " | base64 --decode)\""
	}},
	{"gzip and base64", func(_ *rand.Rand, c string) string {
		return "echo " + enc64(gzipBytes(c)) + " | base64 -d | gunzip | sh"
	}},
	{"tr", func(_ *rand.Rand, c string) string { return "echo '" + strings.ToUpper(c) + "' | tr 'A-Z' 'a-z' | sh" }},
	{"sed", func(_ *rand.Rand, c string) string {
		return "echo '" + strings.ReplaceAll(c, "o", "0") + "' | sed 's/0/o/g' | sh"
	}},
	{"process substitution", func(_ *rand.Rand, c string) string { return "bash <(echo '" + c + "')" }},
	{"cron.d", func(_ *rand.Rand, c string) string { return "echo '*/5 * * * * root " + c + "' > /etc/cron.d/maint" }},
	{"crontab", func(_ *rand.Rand, c string) string { return "echo '0 3 * * * " + c + "' | crontab -" }},
	{"systemd unit", func(r *rand.Rand, c string) string {
		u := fmt.Sprintf("/etc/systemd/system/job%d.service", r.IntN(100))
		return "printf '[Service]\\nType=oneshot\\nExecStart=/bin/sh -c \"" + c + "\"\\n' > " + u
	}},
	{"systemd unit linked", func(_ *rand.Rand, c string) string {
		return "cat > /opt/job.service <<EOF\n[Service]\nExecStart=/bin/sh -c '" + c + "'\nEOF\nsystemctl link /opt/job.service"
	}},
	{"at", func(_ *rand.Rand, c string) string { return "echo '" + c + "' | at now + 5 minutes" }},
	{"outside text", func(_ *rand.Rand, _ string) string { return "$(curl -s https://example.com/next-step)" }},
	{"outside filter", func(_ *rand.Rand, c string) string { return "echo '" + reverse(c) + "' | rev | sh" }},
	{"untaken branch", func(_ *rand.Rand, c string) string {
		return "if [ -f /etc/never ]; then echo " + enc64([]byte(c)) + " | base64 -d | sh; fi"
	}},
	{"environment", func(_ *rand.Rand, _ string) string { return "$BOOT_HOOK" }},
}

// enc64 is base64 on one line, as `base64 -w0` writes it.
func enc64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// randomSafeScript returns 3 to 10 of safeLines in random order.
func randomSafeScript(r *rand.Rand) []string {
	n := 3 + r.IntN(8)
	lines := make([]string, n)
	for i := range lines {
		lines[i] = safeLines[r.IntN(len(safeLines))]
	}
	return lines
}

// TestPropertySplicedCommandNeverAdmitted is the soundness property of
// the principle (docs/rules.md): a random safe script with a forbidden
// command spliced in by any route is denied (KX003) or refused as
// uninspectable (KX009), never admitted; the same script without the
// splice is admitted. The generator is seeded, so the cases are the same
// on every run.
func TestPropertySplicedCommandNeverAdmitted(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 2026))
	const rounds = 12
	for _, sp := range splices {
		for i := range rounds {
			safe := randomSafeScript(r)
			cmd := forbidden[r.IntN(len(forbidden))]
			at := r.IntN(len(safe) + 1)
			lines := append(append(append([]string{"#!/bin/bash"}, safe[:at]...), sp.lines(r, cmd)), safe[at:]...)
			script := strings.Join(lines, "\n") + "\n"
			fs := CheckUserData(apisv1.AMIFamilyAL2023, script)
			if !fs.Denied() || !hasAnyRule(fs.Denials(), RuleUserDataNodeRestart, RuleUserDataUninspectable) {
				t.Errorf("%s #%d: %q spliced in was admitted: %v\n%s", sp.name, i, cmd, fs, script)
			}
			if i == 0 && testing.Verbose() {
				t.Logf("%s: %s", sp.name, rulesOf(fs))
			}
			if i == 0 {
				twin := "#!/bin/bash\n" + strings.Join(safe, "\n") + "\n"
				if fs := CheckUserData(apisv1.AMIFamilyAL2023, twin); fs.Denied() {
					t.Errorf("%s: the safe script without the splice is denied: %v\n%s", sp.name, fs, twin)
				}
			}
		}
	}
}

// TestPropertySafeScriptsAdmitted checks the generator's safe scripts on
// their own: every one is admitted, so that the property above is not
// met by denying everything.
func TestPropertySafeScriptsAdmitted(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 11))
	for i := range 200 {
		script := "#!/bin/bash\n" + strings.Join(randomSafeScript(r), "\n") + "\n"
		if fs := CheckUserData(apisv1.AMIFamilyAL2023, script); fs.Denied() {
			t.Errorf("safe script #%d denied: %v\n%s", i, fs, script)
		}
	}
}

func hasAnyRule(fs Findings, ids ...string) bool {
	for _, f := range fs {
		for _, id := range ids {
			if f.RuleID == id {
				return true
			}
		}
	}
	return false
}

// TestPrinciple enforces the principle of docs/rules.md directly: for a
// command no rule knows (so that no matcher can find it by its name), put
// in a script by every route of splices, karpx either determines it (the
// sandbox recorded it as a command the node runs) or refuses the script as
// uninspectable (KX009). A route that does neither would let any command
// through unseen.
func TestPrinciple(t *testing.T) {
	const probe = "karpx-probe --marker 31"
	r := rand.New(rand.NewPCG(1, 31))
	for _, sp := range splices {
		script := "#!/bin/bash\nyum install -y jq\n" + sp.lines(r, probe) + "\necho done > /tmp/done\n"
		effects, perr := analyzeShell(script)
		if perr != nil {
			t.Fatalf("%s: the script does not parse: %s\n%s", sp.name, perr.msg, script)
		}
		refused := false
		for _, e := range effects {
			refused = refused || e.rule == ruleUnresolved
		}
		f, _ := parseShell(script)
		sb := runSandbox(f, 1)
		determined := false
		for _, c := range sb.commands {
			determined = determined || strings.Contains(c, probe)
		}
		t.Logf("%s: determined %v, refused %v", sp.name, determined, refused)
		if !determined && !refused {
			t.Errorf("%s: the command %q is neither determined nor refused; recorded %q\n%s", sp.name, probe, sb.commands, script)
		}
	}
}

// TestMechanismExamples runs lint/examples/mechanisms (docs/rules.md, "The
// principle"): every unsafe manifest is denied with KX003 or KX009, every
// safe twin admitted without a finding of either.
func TestMechanismExamples(t *testing.T) {
	ms, err := MechanismExamples()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 20 {
		t.Fatalf("%d mechanism pairs, want at least 20", len(ms))
	}
	for _, m := range ms {
		t.Run(m.Name, func(t *testing.T) {
			for _, c := range []struct {
				manifest string
				unsafe   bool
			}{{m.Unsafe, true}, {m.Safe, false}} {
				objs, _, err := DecodeObjects(strings.NewReader(c.manifest), m.Name)
				if err != nil || len(objs) != 1 || objs[0].EC2NodeClass == nil {
					t.Fatalf("does not decode to one EC2NodeClass: %v", err)
				}
				fs := CheckEC2NodeClass(objs[0].EC2NodeClass)
				denied := hasAnyRule(fs.Denials(), RuleUserDataNodeRestart, RuleUserDataUninspectable,
					RuleUserDataAccessKey, RuleUserDataSecretKey, RuleUserDataPrivateKey, RuleUserDataCredential)
				switch {
				case c.unsafe && !denied:
					t.Errorf("unsafe example admitted: %v", fs)
				case !c.unsafe && fs.Denied():
					t.Errorf("safe twin denied: %v", fs)
				}
			}
		})
	}
}
