package lint

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"mvdan.cc/sh/v3/syntax"
)

// This file models the cloud-config modules that run commands or change
// the machine (cloud-init documentation, "Module reference"): bootcmd,
// runcmd, power_state, package_reboot_if_required, users and ssh_keys;
// write_files is in bootfiles.go.

// cloudConfigBody strips a "## template: jinja" first line (cloud-init
// renders the rest as a Jinja template, jinja.go) and returns the rest, its
// 0-based line offset in text, and whether the line was there.
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
	if jinja {
		return scanJinja(s, depth) // rendered first, every branch (jinja.go)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(body), &doc); err != nil {
		line := yamlErrorLine(err)
		i := off + line - 1
		return []Finding{userDataFinding(RuleUserDataParse, s.lineOf(i),
			"cloud-config does not parse as YAML: "+strings.TrimPrefix(err.Error(), "yaml: ")+s.where(i),
			"fix the YAML; cloud-init ignores a cloud-config it cannot load")}
	}
	idx := func(n *yaml.Node) int { return off + n.Line - 1 }
	expanded, err := expandYAML(&doc)
	if err != nil {
		be := err.(*yamlBoundError)
		return []Finding{uninspectable(s, off+be.line-1, "cloud-config "+be.msg)}
	}
	doc = *expanded
	if strings.Contains(body, jinjaUnknown) {
		markJinjaYAML(&doc) // a rendered template's unknown instance data
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	root := doc.Content[0]
	var out []Finding
	files := map[string]string{}
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
		case "swap", "mounts":
			out = append(out, cloudConfigSwap(s, key, val, idx)...)
		case "write_files":
			if val.Kind == yaml.SequenceNode {
				decoded := 0
				for j, f := range val.Content {
					out = append(out, scanWriteFile(s, j, f, idx, &decoded, files)...)
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
	return append(out, cloudConfigFlow(s, root, idx, files)...)
}

// cloudConfigFlow runs the document's commands in the sandbox as
// cloud-init runs them: bootcmd's entries as one script, then the files
// of write_files in place, then runcmd's entries as one script (cloud-init
// writes runcmd to a single shell script), so that a file written by one
// entry or by write_files and run by another, and a unit or cron table
// write_files installs, are followed. Its findings are at the runcmd (or
// bootcmd) key; each entry's own findings come from scanCommandList.
func cloudConfigFlow(s segment, root *yaml.Node, idx func(*yaml.Node) int, files map[string]string) []Finding {
	var script []string
	at := -1
	for _, key := range []string{"bootcmd", "runcmd"} {
		val := mapValue(root, key)
		if val == nil || val.Kind != yaml.SequenceNode {
			continue
		}
		if at < 0 || key == "runcmd" {
			at = idx(val)
		}
		for _, item := range val.Content {
			if cmd, _, ok := commandOf(item, idx); ok {
				script = append(script, cmd)
			}
		}
	}
	if at < 0 && len(files) == 0 {
		return nil
	}
	f, perr := parseShell(strings.Join(script, "\n") + "\n")
	if perr != nil {
		return nil // each entry's parse error is reported on its own
	}
	sb := runSandboxWith(f, 1, files)
	var effects []shellEffect
	for _, e := range sb.effects {
		e.line = 1
		effects = append(effects, e)
	}
	if at < 0 {
		at = 0
	}
	return effectFindings(s, effects, at, "cloud-config bootcmd, write_files and runcmd as cloud-init runs them")
}

// commandOf is the shell text of a bootcmd or runcmd entry and its 0-based
// segment line: a string is a line of the script, a list an argv that
// cloud-init quotes (cloud-init docs, "Runcmd").
func commandOf(item *yaml.Node, idx func(*yaml.Node) int) (string, int, bool) {
	i := idx(item)
	switch item.Kind {
	case yaml.ScalarNode:
		if item.Style == yaml.LiteralStyle || item.Style == yaml.FoldedStyle {
			i++
		}
		return item.Value, i, true
	case yaml.SequenceNode:
		words := make([]string, 0, len(item.Content))
		for _, w := range item.Content {
			q, err := syntax.Quote(w.Value, syntax.LangBash)
			if err != nil {
				q = "'" + strings.ReplaceAll(w.Value, "'", `'\''`) + "'"
			}
			words = append(words, q)
		}
		return strings.Join(words, " "), i, true
	}
	return "", 0, false
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
		cmd, i, ok := commandOf(item, idx)
		if !ok {
			continue
		}
		lines = append(lines, cmd)
		fs, perr := scanCommand(s, cmd, i, ctx)
		if perr != nil && perr.tooDeep {
			out = append(out, tooDeepFinding(s, i, ctx+" cannot be read as shell: "+perr.msg))
			continue
		}
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

// yamlErrorLine returns the 1-based line a yaml.v3 error names ("yaml:
// line 3: mapping values are not allowed in this context"), or 1 when it
// names none.
func yamlErrorLine(err error) int {
	line := 1
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		fmt.Sscan(m[1], &line)
	}
	return line
}
