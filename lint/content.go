package lint

import (
	"bytes"
	"fmt"
	"iter"
	"regexp"
	"strings"
)

// segmentKind is how a piece of userData is executed or read on the node.
type segmentKind int

const (
	segShell              segmentKind = iota // a shell script (text/x-shellscript, AL2/AL2023 plain)
	segPowerShell                            // a PowerShell script (Windows)
	segCloudConfig                           // cloud-init cloud-config YAML (runcmd/bootcmd are shell)
	segNodeConfig                            // nodeadm NodeConfig YAML
	segTOML                                  // Bottlerocket settings
	segOpaque                                // anything else: only secrets are looked for
	segCloudConfigArchive                    // #cloud-config-archive: a YAML list of parts
	segInclude                               // #include, #include-once: URLs cloud-init fetches
	segPartHandler                           // #part-handler: Python code cloud-init runs
	segJinja                                 // "## template: jinja", text/jinja2: rendered, then read by its first line
)

// segment is a piece of userData and where it starts.
type segment struct {
	kind segmentKind
	// text is the content.
	text string
	// line is the 1-based userData line of text's first line.
	line int
	// encoded means text was decoded from base64/quoted-printable: its
	// lines do not map onto userData lines, so findings point at line.
	encoded bool
	// part is the MIME part path ("2", "2.1"), "" outside MIME.
	part string
}

// lineOf maps a 0-based line index inside the segment to a userData line.
func (s segment) lineOf(i int) int {
	if s.encoded {
		return s.line
	}
	return s.line + i
}

// where describes the location for messages about encoded parts.
func (s segment) where(i int) string {
	if s.encoded {
		if s.part == "" {
			return fmt.Sprintf(" (decoded line %d)", i+1)
		}
		return fmt.Sprintf(" (MIME part %s, decoded line %d)", s.part, i+1)
	}
	return ""
}

// The node agents whose restart during boot makes a registered node flap
// NotReady (issue P4): kubelet, and containerd, whose restart kills every
// container's shim connection and makes kubelet's PLEG report NotReady.
var nodeAgents = map[string]bool{"kubelet": true, "containerd": true}

// restartWords are lower-case substrings one of which every line that
// shellNodeRestart or powerShellNodeRestart flags contains: the agents'
// names, or a power-state command. A line with none (ignoring ASCII case)
// is skipped without tokenizing.
var restartWords = []string{"kubelet", "containerd", "systemctl", "reboot", "poweroff", "halt", "shutdown", "computer", "init"}

func mayRestart(line string) bool {
	var buf [256]byte
	lower := append(buf[:0], line...)
	for i, c := range lower {
		lower[i] = lowerASCII(c)
	}
	for _, w := range restartWords {
		if bytes.Contains(lower, []byte(w)) {
			return true
		}
	}
	return false
}

// powerShellNodeRestart is shellNodeRestart for PowerShell lines.
func powerShellNodeRestart(line string) string {
	if !mayRestart(line) {
		return ""
	}
	lower := strings.ToLower(line)
	mentionsAgent := strings.Contains(lower, "kubelet") || strings.Contains(lower, "containerd")
	cmds := splitShellCommands(line)
	if what := powerShellWMIRestart(strings.ToLower(strings.Join(cmds, " ; "))); what != "" {
		return what
	}
	for _, cmd := range cmds {
		words := commandWords(cmd)
		if len(words) == 0 {
			continue
		}
		name := strings.ToLower(words[0])
		if powerShellAgentStoppers[name] {
			if mentionsAgent {
				return words[0] + " " + agentIn(lower)
			}
			continue
		}
		switch name {
		case "restart-computer", "stop-computer":
			return words[0]
		case "shutdown", "shutdown.exe":
			for _, a := range words[1:] {
				if a = strings.ToLower(a); a == "/r" || a == "/s" || a == "-r" || a == "-s" || a == "/g" {
					return "shutdown " + a
				}
			}
		case "net", "net.exe", "sc", "sc.exe":
			if n := nonOptions(words[1:]); len(n) >= 2 && strings.EqualFold(n[0], "stop") && nodeAgents[strings.ToLower(n[1])] {
				return name + " stop " + n[1]
			}
		}
	}
	return ""
}

func agentIn(lower string) string {
	if strings.Contains(lower, "kubelet") {
		return "kubelet"
	}
	return "containerd"
}

// splitShellCommands splits a line into simple commands outside quotes. A
// '#' that starts a word outside quotes ends the line (a comment).
func splitShellCommands(line string) []string {
	var cmds []string
	start := 0 // start of the current command in line
	quote := byte(0)
	flush := func(end int) {
		if s := strings.TrimSpace(line[start:end]); s != "" {
			cmds = append(cmds, s)
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			flush(i)
			return cmds
		case c == ';' || c == '&' || c == '|' || c == '`' || c == '(' || c == ')' || c == '{' || c == '}':
			flush(i)
			start = i + 1
		case c == '$' && i+1 < len(line) && line[i+1] == '(':
			flush(i)
			i++
			start = i + 1
		}
	}
	flush(len(line))
	return cmds
}

// shellPrefixes are words that run the next word as the command.
var shellPrefixes = map[string]bool{
	"sudo": true, "env": true, "nohup": true, "exec": true, "command": true,
	"then": true, "do": true, "else": true, "elif": true, "if": true, "!": true,
	"time": true, "nice": true, "ionice": true, "chroot": true, "timeout": true,
}

// commandWords returns the words of a simple command with quotes removed
// and prefix words (sudo -u root, env A=b, VAR=value…) dropped.
func commandWords(cmd string) []string {
	words := strings.Fields(cmd)
	for i, f := range words {
		words[i] = strings.Trim(f, `"'`)
	}
	for len(words) > 0 {
		w := words[0]
		switch {
		case shellPrefixes[w]:
			words = words[1:]
			if (w == "chroot" || w == "timeout") && len(words) > 0 {
				words = words[1:] // chroot DIR, timeout DURATION
			}
			// Options of the prefix (sudo -u root, nice -n 10).
			for len(words) > 0 && strings.HasPrefix(words[0], "-") {
				opt := words[0]
				words = words[1:]
				if (opt == "-u" || opt == "-n" || opt == "-g") && len(words) > 0 {
					words = words[1:]
				}
			}
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "="):
			words = words[1:] // VAR=value
		default:
			return words
		}
	}
	return words
}

func nonOptions(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
		}
	}
	return out
}

var (
	// PowerShell: Invoke-Expression over a web download of an http:// URL.
	psHTTPExecRE = regexp.MustCompile(`(?i)\b(iex|invoke-expression)\b`)
	psDownloadRE = regexp.MustCompile(`(?i)(downloadstring|invoke-webrequest|invoke-restmethod|\biwr\b|\birm\b|\bcurl\b|\bwget\b)[^;]*http://`)
)

// httpPipe reports whether a PowerShell line runs a plain-http download
// with Invoke-Expression.
func httpPipe(line string) bool {
	if indexFoldASCII(line, "http://") < 0 {
		return false // cheap pre-filter: the regexps below backtrack
	}
	return psHTTPExecRE.MatchString(line) && psDownloadRE.MatchString(line)
}

var (
	// A 40-character secret access key assigned to a name that says so
	// (aws_secret_access_key, AWS_SECRET_ACCESS_KEY, SecretAccessKey, …).
	secretKeyRE = regexp.MustCompile(`(?i)(secret_?access_?key|aws_?secret_?key|secretkey)["']?\s*(:=|=|:|\s)\s*["']?([A-Za-z0-9/+]{40})([^A-Za-z0-9/+=]|$)`)
	// PEM private keys (RFC 7468 labels "PRIVATE KEY", "RSA PRIVATE KEY",
	// "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY";
	// also PGP's "PRIVATE KEY BLOCK").
	privateKeyRE = regexp.MustCompile(`-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----`)
)

// scanSecrets reports credentials in s: gitleaks' rule set
// (scanDetectorSecrets, which also finds AWS access key IDs and private
// keys) and, for the forms it does not cover, AWS secret access keys
// assigned to a name that says so (KX005) and PEM private-key headers
// without a full key body (KX006). One finding per rule and line; the
// detector's (which names its rule) is kept over the pattern's. Values are
// never echoed: only their first four characters.
func scanSecrets(s segment) []Finding {
	return dedupe(append(scanPatternSecrets(s), scanDetectorSecrets(s)...))
}

// dedupeSecrets drops a secret finding whose rule and value an earlier
// finding already reports: the raw text's scan decodes base64 substrings
// itself, so a credential in an encoded MIME part is found there and
// again in the part's decoded text. Values match when one is a prefix of
// the other (a rule may capture less of a value than another).
func dedupeSecrets(fs Findings) Findings {
	out := fs[:0]
	var kept []Finding
next:
	for _, f := range fs {
		if f.secret != "" {
			for _, k := range kept {
				if k.RuleID == f.RuleID && (strings.HasPrefix(k.secret, f.secret) || strings.HasPrefix(f.secret, k.secret)) {
					continue next
				}
			}
			kept = append(kept, f)
		}
		out = append(out, f)
	}
	return out
}

// scanPatternSecrets is the pattern half of scanSecrets.
func scanPatternSecrets(s segment) []Finding {
	var out []Finding
	for i, l := range eachLine(s.text) {
		// Cheap substring pre-filters keep the regexps off ordinary lines.
		if indexFoldASCII(l, "secret") < 0 && !strings.Contains(l, "PRIVATE KEY") {
			continue
		}
		if m := secretKeyRE.FindStringSubmatch(l); m != nil {
			f := userDataFinding(RuleUserDataSecretKey, s.lineOf(i),
				"contains an AWS secret access key"+s.where(i),
				"remove it and rotate the key; grant access through the node IAM role (spec.role)")
			f.secret = m[3]
			out = append(out, f)
		}
		if privateKeyRE.MatchString(l) {
			out = append(out, userDataFinding(RuleUserDataPrivateKey, s.lineOf(i),
				"contains a PEM private key"+s.where(i),
				"remove it and rotate the key; fetch it at boot from Secrets Manager or SSM with the node role"))
		}
	}
	return out
}

// scanScript reports KX003 and KX007 in a PowerShell segment, line by
// line.
func scanScript(s segment) []Finding {
	var out []Finding
	for i, l := range logicalLines(blankPowerShellBlockComments(s.text), s.kind) {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if what := powerShellNodeRestart(t); what != "" {
			out = append(out, userDataFinding(RuleUserDataNodeRestart, s.lineOf(i),
				fmt.Sprintf("%q during boot makes the node flap NotReady%s", what, s.where(i)),
				"remove it; configure kubelet via spec.kubelet and containerd via drop-in files written before the bootstrap, which starts them once"))
		}
		if httpPipe(t) {
			out = append(out, userDataFinding(RuleUserDataHTTPPipe, s.lineOf(i),
				"pipes a plain-http download to a shell"+s.where(i),
				"download over https, verify a checksum, then run the file"))
		}
	}
	return out
}

// logicalLines yields the lines of a script with line continuations
// joined, each with the 0-based index of its first physical line: a line
// ending in an unescaped backslash (shell, cloud-config) or a backtick
// (PowerShell) continues on the next, so "systemctl restart \\" then
// "kubelet" is read as one command, as the shell reads it.
func logicalLines(text string, kind segmentKind) iter.Seq2[int, string] {
	cont := func(l string) (string, bool) {
		if kind == segPowerShell {
			if t := strings.TrimRight(l, " \t"); strings.HasSuffix(t, "`") {
				return t[:len(t)-1], true
			}
			return l, false
		}
		n := len(l) - len(strings.TrimRight(l, `\`))
		if n%2 == 1 {
			return l[:len(l)-1], true
		}
		return l, false
	}
	return func(yield func(int, string) bool) {
		first, open := 0, false
		var joined strings.Builder // linear even for many continuations
		for i, l := range eachLine(text) {
			body, more := cont(l)
			if !open && !more {
				if !yield(i, l) { // the common case: no copy
					return
				}
				continue
			}
			if !open {
				first = i
				joined.Reset()
			}
			joined.WriteString(body)
			if open = more; open {
				continue
			}
			if !yield(first, joined.String()) {
				return
			}
		}
		if open {
			yield(first, joined.String())
		}
	}
}

func userDataFinding(rule string, line int, msg, fix string) Finding {
	return Finding{RuleID: rule, Severity: severityOf(rule), Field: "spec.userData", Line: line, Message: msg, Fix: fix}
}
