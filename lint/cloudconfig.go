package lint

import (
	"encoding/base64"
	"fmt"
	"path"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"mvdan.cc/sh/v3/syntax"
)

// This file models cloud-init: the cloud-config modules that run commands
// or change the machine (cloud-init documentation, "Module reference"),
// the user-data formats that fetch or run code karpx cannot read
// ("User data formats": #include, #part-handler) and the archive format
// that bundles parts (#cloud-config-archive).

// maxSegmentDepth bounds parts nested in parts (#cloud-config-archive in
// an archive).
const maxSegmentDepth = 4

// scanSegment reports KX002, KX003, KX006, KX007 and KX009 findings in one
// piece of userData, by what cloud-init does with it.
func scanSegment(s segment, depth int) []Finding {
	if depth > maxSegmentDepth {
		return []Finding{uninspectable(s, 0, "parts nested more than 4 deep in #cloud-config-archive")}
	}
	switch s.kind {
	case segShell:
		return scanShellSegment(s)
	case segPowerShell:
		return scanScript(s)
	case segCloudConfig:
		return scanCloudConfig(s, depth)
	case segCloudConfigArchive:
		return scanCloudConfigArchive(s, depth)
	case segInclude:
		return []Finding{uninspectable(s, 0, "is an #include part: cloud-init downloads more userData from its URLs at boot, which karpx cannot inspect")}
	case segPartHandler:
		return []Finding{uninspectable(s, 0, "is a #part-handler: cloud-init runs its Python code on every part, which karpx cannot model")}
	}
	return nil
}

func uninspectable(s segment, i int, msg string) Finding {
	return userDataFinding(RuleUserDataUninspectable, s.lineOf(i), msg+s.where(i),
		"write the commands as a shell script or cloud-config in spec.userData itself")
}

// shebangInterpreter returns the interpreter named on a "#!" first line
// ("bash" for "#!/usr/bin/env bash -e"), or "".
func shebangInterpreter(text string) string {
	t := strings.TrimLeft(text, " \t\r\n")
	if !strings.HasPrefix(t, "#!") {
		return ""
	}
	first, _, _ := strings.Cut(t[2:], "\n")
	f := strings.Fields(first)
	if len(f) == 0 {
		return ""
	}
	name := path.Base(f[0])
	if name == "env" {
		for _, w := range f[1:] {
			if !strings.HasPrefix(w, "-") && !strings.Contains(w, "=") {
				return path.Base(w)
			}
		}
	}
	if name == "busybox" && len(f) > 1 {
		return path.Base(f[1])
	}
	return name
}

// scanShellSegment parses a shell script and reports what it does; a
// script the parser rejects is KX002 with the line and column.
func scanShellSegment(s segment) []Finding {
	if in := shebangInterpreter(s.text); in != "" && !shells[in] {
		return []Finding{uninspectable(s, 0, fmt.Sprintf("runs a #!%s script; karpx models only shell scripts", in))}
	}
	effects, perr := analyzeShell(s.text)
	if perr != nil {
		return []Finding{shellParseFinding(s, perr, "the shell script")}
	}
	return effectFindings(s, effects, 0, "")
}

func shellParseFinding(s segment, perr *shellSyntaxError, what string) Finding {
	i := perr.line - 1
	return userDataFinding(RuleUserDataParse, s.lineOf(i),
		fmt.Sprintf("%s does not parse (line %d, column %d): %s%s", what, perr.line, perr.col, perr.msg, s.where(i)),
		"fix the shell syntax; check it with bash -n")
}

// scanShellLenient is the shell scan of text that is not valid userData:
// the whole text when it parses, else each line that parses on its own.
func scanShellLenient(s segment) []Finding {
	if effects, perr := analyzeShell(s.text); perr == nil {
		return effectFindings(s, effects, 0, "")
	}
	var out []Finding
	for i, l := range logicalLines(s.text, segShell) {
		if effects, perr := analyzeShell(l); perr == nil {
			out = append(out, effectFindings(s, effects, i, "")...)
		}
	}
	return out
}

// effectFindings turns shell effects (1-based lines relative to line
// index off of the segment) into findings; ctx names the cloud-config key.
func effectFindings(s segment, effects []shellEffect, off int, ctx string) []Finding {
	var out []Finding
	for _, e := range effects {
		i := off + e.line - 1
		where := s.where(i)
		if ctx != "" {
			where = " (" + ctx + ")" + where
		}
		switch e.rule {
		case RuleUserDataNodeRestart:
			out = append(out, userDataFinding(e.rule, s.lineOf(i),
				fmt.Sprintf("%q during boot makes the node flap NotReady%s", e.what, where),
				"remove it; configure kubelet via spec.kubelet and containerd via drop-in files written before the bootstrap, which starts them once"))
		case RuleUserDataHTTPPipe:
			out = append(out, userDataFinding(e.rule, s.lineOf(i),
				"pipes a plain-http download to a shell"+where,
				"download over https, verify a checksum, then run the file"))
		case RuleUserDataParse:
			out = append(out, userDataFinding(e.rule, s.lineOf(i),
				e.what+where, "fix the quoting of the nested script; check it with bash -n -c '…'"))
		}
	}
	return out
}

// scanCommand analyses one command of a cloud-config module that starts
// at 0-based segment line i.
func scanCommand(s segment, cmd string, i int, ctx string) ([]Finding, *shellSyntaxError) {
	effects, perr := analyzeShell(cmd)
	if perr != nil {
		return nil, perr
	}
	return effectFindings(s, effects, i, ctx), nil
}

// cloudConfigBody strips a "## template: jinja" first line (cloud-init
// renders the rest as a Jinja template) and reports whether it was there.
func cloudConfigBody(text string) (string, int, bool) {
	t := strings.TrimLeft(text, "\r\n")
	first, rest, _ := strings.Cut(t, "\n")
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(first)), "## template:") {
		return rest, len(text) - len(t) + 1, true
	}
	return text, 0, false
}

// scanCloudConfig walks a #cloud-config document: bootcmd and runcmd
// (cloud-init docs, modules "Bootcmd" and "Runcmd"), power_state ("Power
// State Change"), package_reboot_if_required ("Package Update Upgrade
// Install"), write_files ("Write Files", with its encodings), users[].
// ssh_authorized_keys and ssh_keys ("Users and Groups", "SSH").
func scanCloudConfig(s segment, depth int) []Finding {
	body, off, jinja := cloudConfigBody(s.text)
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(body), &doc); err != nil {
		if jinja {
			return nil // unrendered template syntax is not YAML yet
		}
		line := 1
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			fmt.Sscan(m[1], &line)
		}
		i := off + line - 1
		return []Finding{userDataFinding(RuleUserDataParse, s.lineOf(i),
			"cloud-config does not parse as YAML: "+strings.TrimPrefix(err.Error(), "yaml: ")+s.where(i),
			"fix the YAML; cloud-init ignores a cloud-config it cannot load")}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	root := doc.Content[0]
	idx := func(n *yaml.Node) int { return off + n.Line - 1 }
	var out []Finding
	for k := 0; k+1 < len(root.Content); k += 2 {
		key, val := root.Content[k].Value, root.Content[k+1]
		switch key {
		case "bootcmd", "runcmd":
			out = append(out, scanCommandList(s, key, val, idx)...)
		case "power_state":
			mode, _ := scalarAt(val, "mode")
			if mode == "" {
				break
			}
			if c := mapValue(val, "condition"); c != nil && c.Kind == yaml.ScalarNode && (c.Tag == "!!bool" && strings.EqualFold(c.Value, "false")) {
				break // condition false: cloud-init never changes the power state
			}
			out = append(out, userDataFinding(RuleUserDataNodeRestart, s.lineOf(idx(mapValue(val, "mode"))),
				fmt.Sprintf("cloud-config power_state mode %s: cloud-init %ss the node after the modules run, so it registers and then goes NotReady%s", mode, powerVerb(mode), s.where(idx(val))),
				"remove power_state; the autoscaler replaces nodes instead of rebooting them"))
		case "package_reboot_if_required", "apt_reboot_if_required":
			if val.Kind == yaml.ScalarNode && val.Tag == "!!bool" && strings.EqualFold(val.Value, "true") {
				out = append(out, userDataFinding(RuleUserDataNodeRestart, s.lineOf(idx(val)),
					"cloud-config "+key+": true reboots the node after package upgrades"+s.where(idx(val)),
					"remove it; use an AMI with current packages (spec.amiSelectorTerms) and let drift replace nodes"))
			}
		case "write_files":
			if val.Kind == yaml.SequenceNode {
				for j, f := range val.Content {
					out = append(out, scanWriteFile(s, j, f, idx)...)
				}
			}
		case "users":
			if val.Kind == yaml.SequenceNode {
				for j, u := range val.Content {
					out = append(out, scanAuthorizedKeys(s, fmt.Sprintf("users[%d].ssh_authorized_keys", j), mapValue(u, "ssh_authorized_keys"), idx)...)
				}
			}
		case "ssh_authorized_keys":
			out = append(out, scanAuthorizedKeys(s, key, val, idx)...)
		case "ssh_keys":
			if val.Kind == yaml.MappingNode {
				for m := 0; m+1 < len(val.Content); m += 2 {
					if strings.HasSuffix(val.Content[m].Value, "_private") {
						out = append(out, userDataFinding(RuleUserDataPrivateKey, s.lineOf(idx(val.Content[m])),
							"cloud-config ssh_keys."+val.Content[m].Value+" puts an SSH host private key in userData"+s.where(idx(val.Content[m])),
							"let the node generate its host keys; userData is readable through IMDS and DescribeInstanceAttribute"))
					}
				}
			}
		}
	}
	return out
}

func powerVerb(mode string) string {
	switch mode {
	case "poweroff":
		return "power"
	case "halt":
		return "halt"
	}
	return "reboot"
}

// scanCommandList analyses bootcmd or runcmd: each string entry is a line of
// the shell script cloud-init writes, each list entry an argv it quotes
// (cloud-init docs, "Runcmd": "If the item is a list, it will be properly
// quoted. If the item is a string, it will be written to a file and
// interpreted using sh").
func scanCommandList(s segment, key string, val *yaml.Node, idx func(*yaml.Node) int) []Finding {
	if val.Kind != yaml.SequenceNode {
		return nil
	}
	var out []Finding
	var lines []string
	var failed []Finding
	for j, item := range val.Content {
		ctx := fmt.Sprintf("cloud-config %s[%d]", key, j)
		var cmd string
		i := idx(item)
		switch item.Kind {
		case yaml.ScalarNode:
			cmd = item.Value
			if item.Style == yaml.LiteralStyle || item.Style == yaml.FoldedStyle {
				i++
			}
		case yaml.SequenceNode:
			words := make([]string, 0, len(item.Content))
			for _, w := range item.Content {
				q, err := syntax.Quote(w.Value, syntax.LangBash)
				if err != nil {
					q = "'" + strings.ReplaceAll(w.Value, "'", `'\''`) + "'"
				}
				words = append(words, q)
			}
			cmd = strings.Join(words, " ")
		default:
			continue
		}
		lines = append(lines, cmd)
		fs, perr := scanCommand(s, cmd, i, ctx)
		if perr != nil {
			pi := i + perr.line - 1
			failed = append(failed, userDataFinding(RuleUserDataParse, s.lineOf(pi),
				fmt.Sprintf("%s does not parse as shell (line %d, column %d): %s%s", ctx, perr.line, perr.col, perr.msg, s.where(pi)),
				"fix the shell syntax; check it with bash -n"))
			continue
		}
		out = append(out, fs...)
	}
	if len(failed) > 0 {
		// Entries may continue each other (an if … then in one, fi in
		// another): cloud-init runs them as one script.
		if _, perr := parseShell(strings.Join(lines, "\n")); perr != nil {
			out = append(out, failed...)
		}
	}
	return out
}

// scanAuthorizedKeys reports private keys given as authorized (public)
// keys.
func scanAuthorizedKeys(s segment, ctx string, val *yaml.Node, idx func(*yaml.Node) int) []Finding {
	if val == nil || val.Kind != yaml.SequenceNode {
		return nil
	}
	var out []Finding
	for j, k := range val.Content {
		if k.Kind == yaml.ScalarNode && privateKeyRE.MatchString(k.Value) {
			i := idx(k)
			out = append(out, userDataFinding(RuleUserDataPrivateKey, s.lineOf(i),
				fmt.Sprintf("cloud-config %s[%d] is a private key; authorized keys are public keys%s", ctx, j, s.where(i)),
				"put the public key (ssh-ed25519 AAAA…) there and keep the private key off the node"))
		}
	}
	return out
}

// scanWriteFile decodes one write_files entry as cloud-init does
// (encoding b64/base64, gz/gzip, gz+b64/gzip+base64/…; cloud-init docs,
// "Write Files") and scans it for secrets, and as a script when its path is
// executed at boot.
func scanWriteFile(s segment, j int, f *yaml.Node, idx func(*yaml.Node) int) []Finding {
	p, _ := scalarAt(f, "path")
	content := mapValue(f, "content")
	ctx := fmt.Sprintf("cloud-config write_files[%d] %s", j, p)
	i := idx(f)
	if content == nil {
		if src := mapValue(f, "source"); src != nil && p != "" {
			if _, kind := bootScript(p, ""); kind != "" {
				return []Finding{uninspectable(s, i, ctx+" is downloaded at boot (source.uri) and then executed")}
			}
		}
		return nil
	}
	if content.Kind != yaml.ScalarNode {
		return nil
	}
	ci := idx(content)
	text := content.Value
	enc, _ := scalarAt(f, "encoding")
	enc = strings.ToLower(strings.TrimSpace(enc))
	decoded := false
	if content.Tag == "!!binary" {
		b, err := base64.StdEncoding.DecodeString(stripSpace(text))
		if err != nil {
			return []Finding{uninspectable(s, ci, ctx+": !!binary content is not base64")}
		}
		text, decoded = string(b), true
	}
	switch enc {
	case "b64", "base64", "gz+b64", "gzip+base64", "gz+base64", "gzip+b64":
		b, err := base64.StdEncoding.DecodeString(stripSpace(text))
		if err != nil {
			return []Finding{uninspectable(s, ci, ctx+": encoding "+enc+" but the content is not base64")}
		}
		text, decoded = string(b), true
	}
	if strings.HasPrefix(enc, "gz") {
		out, err := gunzip(text, new(int))
		if err != nil {
			return []Finding{uninspectable(s, ci, ctx+": encoding "+enc+" but the content is not gzip")}
		}
		text, decoded = out, true
	}
	var out []Finding
	if decoded {
		for _, fd := range scanSecrets(segment{kind: segOpaque, text: text, line: s.lineOf(ci), encoded: true, part: s.part}) {
			fd.Message += " (" + ctx + ", decoded from " + enc + ")"
			out = append(out, fd)
		}
	}
	if scripts, kind := bootScript(p, text); kind != "" {
		sub := &shellScan{}
		for _, sc := range scripts {
			_ = sub.script(sc, 1, 1)
		}
		for _, e := range sub.effects {
			if e.rule == RuleUserDataParse {
				continue
			}
			e.what += " (in " + kind + " " + p + ")"
			e.line = 1
			out = append(out, effectFindings(s, []shellEffect{e}, ci, ctx)...)
		}
	}
	return out
}

// Paths whose content runs at boot (systemd.unit(5), cron(8), cloud-init
// docs "scripts_per_boot", profile.d).
var (
	systemdDirs = []string{"/etc/systemd/system/", "/usr/lib/systemd/system/", "/lib/systemd/system/", "/run/systemd/system/", "/usr/local/lib/systemd/system/"}
	execLineRE  = regexp.MustCompile(`(?m)^\s*Exec[A-Za-z]+\s*=\s*(.*)$`)
)

// bootScript returns the shell commands a file at p runs at boot and what
// kind of file it is ("systemd unit", "cron table", …); kind "" means p is
// not executed at boot.
func bootScript(p, content string) ([]string, string) {
	p = path.Clean(p)
	dir := path.Dir(p) + "/"
	switch {
	case p == "/etc/rc.local" || p == "/etc/rc.d/rc.local":
		return []string{content}, "rc.local"
	case strings.HasPrefix(p, "/var/lib/cloud/scripts/per-boot/"), strings.HasPrefix(p, "/var/lib/cloud/scripts/per-instance/"), strings.HasPrefix(p, "/var/lib/cloud/scripts/per-once/"):
		return []string{content}, "cloud-init script"
	case strings.HasPrefix(p, "/etc/profile.d/"):
		return []string{content}, "profile.d script"
	case p == "/etc/crontab", strings.HasPrefix(p, "/etc/cron.d/"):
		return cronCommands(content, true), "cron table"
	case strings.HasPrefix(p, "/var/spool/cron/"):
		return cronCommands(content, false), "cron table"
	case strings.HasPrefix(dir, "/etc/cron.hourly/"), strings.HasPrefix(dir, "/etc/cron.daily/"), strings.HasPrefix(dir, "/etc/cron.weekly/"), strings.HasPrefix(dir, "/etc/cron.monthly/"):
		return []string{content}, "cron script"
	}
	for _, d := range systemdDirs {
		if strings.HasPrefix(p, d) {
			return unitCommands(content), "systemd unit"
		}
	}
	return nil, ""
}

// unitCommands returns the Exec*= command lines of a systemd unit or
// drop-in, without the special prefixes (-, @, :, +, !) (systemd.service(5)).
func unitCommands(content string) []string {
	content = strings.ReplaceAll(content, "\\\n", " ")
	var out []string
	for _, m := range execLineRE.FindAllStringSubmatch(content, -1) {
		cmd := strings.TrimLeft(strings.TrimSpace(m[1]), "-@:+!|")
		if cmd != "" {
			out = append(out, cmd)
		}
	}
	return out
}

// cronCommands returns the commands of a crontab (crontab(5)); system
// tables (/etc/crontab, /etc/cron.d) have a user field.
func cronCommands(content string, system bool) []string {
	var out []string
	for _, l := range strings.Split(content, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Fields(t)
		if eq := strings.IndexByte(f[0], '='); eq > 0 && !strings.HasPrefix(f[0], "@") && !strings.ContainsAny(f[0][:eq], "*/,-") {
			continue // NAME=value
		}
		n := 5
		if strings.HasPrefix(f[0], "@") {
			n = 1
		}
		if system {
			n++
		}
		if len(f) <= n {
			continue
		}
		cmd := strings.Join(f[n:], " ")
		cmd, _, _ = strings.Cut(cmd, "%") // % starts cron's standard input
		out = append(out, cmd)
	}
	return out
}

// scanCloudConfigArchive walks a #cloud-config-archive: a YAML list of
// parts, each a string or a mapping with type and content (cloud-init docs,
// "User data formats", "Cloud config archive"); a part without a
// recognisable type is cloud-config.
func scanCloudConfigArchive(s segment, depth int) []Finding {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s.text), &doc); err != nil {
		line := 1
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			fmt.Sscan(m[1], &line)
		}
		return []Finding{userDataFinding(RuleUserDataParse, s.lineOf(line-1),
			"#cloud-config-archive does not parse as YAML: "+strings.TrimPrefix(err.Error(), "yaml: ")+s.where(line-1),
			"fix the YAML; it must be a list of parts with type and content")}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil
	}
	var out []Finding
	for j, item := range doc.Content[0].Content {
		var content *yaml.Node
		typ := ""
		switch item.Kind {
		case yaml.ScalarNode:
			content = item
		case yaml.MappingNode:
			content = mapValue(item, "content")
			typ, _ = scalarAt(item, "type")
		}
		if content == nil || content.Kind != yaml.ScalarNode {
			continue
		}
		kind := guessKind(content.Value)
		if typ != "" {
			kind = segmentKindOf(typ, content.Value)
		} else if kind == segOpaque {
			kind = segCloudConfig
		}
		sub := segment{kind: kind, text: content.Value, line: s.lineOf(content.Line - 1), encoded: s.encoded, part: s.part}
		if content.Style == yaml.LiteralStyle {
			sub.line++
		} else {
			sub.encoded = true // quoted or folded text: lines do not map
			if sub.part == "" {
				sub.part = fmt.Sprintf("archive[%d]", j)
			}
		}
		out = append(out, scanSegment(sub, depth+1)...)
	}
	return out
}
