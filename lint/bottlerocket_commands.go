package lint

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// bootstrapCommandFindings judges Bottlerocket's bootstrap commands
// (Bottlerocket docs, "Settings", settings.bootstrap-commands.<name>:
// commands, a list of commands each a list of strings; mode always, once
// or off; essential; and "Bootstrap commands": systemd runs them before
// the bootstrap containers, in the order of their names). A command with
// mode "off" never runs and is skipped; every other one (mode always or
// once, or no mode) is judged as what it runs:
//
//   - Bottlerocket runs apiclient only there. `apiclient reboot`,
//     `apiclient update apply --reboot` and an `apiclient raw` call of the
//     reboot action reboot the node mid-boot (with mode always at every
//     boot, endlessly): KX003. `apiclient exec <container> <argv>` runs
//     argv in a host container, judged as the shell commands below;
//   - any other argv is run as exec runs it, without a shell, so it is
//     judged as the shell command line that quotes each argument
//     (systemctl stop kubelet is KX003, `sh -c SCRIPT` runs SCRIPT through
//     the interpreter like any script);
//   - commands that are not a list of string lists are uninspectable
//     (KX009): Bottlerocket refuses them, and karpx cannot say what runs.
//
// Findings point at the commands key's line and name the command.
func (s *BottlerocketSettings) bootstrapCommandFindings() []Finding {
	settings, _ := s.Tree["settings"].(map[string]any)
	cmds, _ := settings["bootstrap-commands"].(map[string]any)
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Finding
	for _, n := range names {
		key := "settings.bootstrap-commands." + n
		c, ok := cmds[n].(map[string]any)
		if !ok {
			continue
		}
		if mode, _ := c["mode"].(string); mode == "off" {
			continue
		}
		line := s.Lines[key+".commands"]
		if line == 0 {
			line = s.Lines[key]
		}
		raw, present := c["commands"]
		if !present {
			continue
		}
		list, ok := raw.([]any)
		if !ok {
			out = append(out, bootstrapUninspectable(line, key+".commands is not a list of commands (each a list of strings)"))
			continue
		}
		for i, item := range list {
			where := fmt.Sprintf("%s.commands[%d]", key, i)
			argv, ok := stringList(item)
			if !ok || len(argv) == 0 {
				out = append(out, bootstrapUninspectable(line, where+" is not a non-empty list of strings"))
				continue
			}
			out = append(out, judgeBootstrapCommand(argv, where, line)...)
		}
	}
	return out
}

// judgeBootstrapCommand judges one argv of a bootstrap command, at line.
func judgeBootstrapCommand(argv []string, where string, line int) []Finding {
	if path.Base(argv[0]) != "apiclient" {
		return bootstrapArgv(argv, where, line)
	}
	sub, rest := apiclientSubcommand(argv[1:])
	reboot := false
	switch sub {
	case "reboot":
		reboot = true
	case "update":
		for _, a := range rest {
			reboot = reboot || a == "--reboot" || a == "-r"
		}
	case "raw":
		for _, a := range rest {
			reboot = reboot || strings.Contains(strings.ToLower(a), "/actions/reboot")
		}
	case "exec":
		// apiclient exec [--tty] [--] CONTAINER COMMAND…
		i := 0
		for i < len(rest) && strings.HasPrefix(rest[i], "-") {
			i++
		}
		if i+1 < len(rest) {
			return bootstrapArgv(rest[i+1:], where+" (apiclient exec "+rest[i]+")", line)
		}
	}
	if !reboot {
		return nil
	}
	return []Finding{userDataFinding(RuleUserDataNodeRestart, line,
		fmt.Sprintf("%q in the Bottlerocket bootstrap command %s reboots the node during boot (with mode always, at every boot)", strings.Join(argv, " "), where),
		"remove it; the autoscaler replaces nodes instead of rebooting them, and settings apply without a reboot")}
}

// apiclientSubcommand skips apiclient's global options (--socket-path
// PATH, -s PATH, --log-level LEVEL, -v) and returns its subcommand and
// the arguments after it.
func apiclientSubcommand(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--socket-path" || a == "-s" || a == "--log-level":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a, args[i+1:]
		}
	}
	return "", nil
}

// bootstrapArgv judges argv as the shell command line that quotes each of
// its words, through the same scan as every shell script.
func bootstrapArgv(argv []string, where string, line int) []Finding {
	words := make([]string, 0, len(argv))
	for _, w := range argv {
		q, err := syntax.Quote(w, syntax.LangBash)
		if err != nil {
			q = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		words = append(words, q)
	}
	fs := scanShellSegment(segment{kind: segShell, text: strings.Join(words, " ") + "\n", line: line})
	for i := range fs {
		fs[i].Message += " (in the Bottlerocket bootstrap command " + where + ")"
	}
	return fs
}

func bootstrapUninspectable(line int, msg string) Finding {
	return userDataFinding(RuleUserDataUninspectable, line, msg+": karpx cannot say what Bottlerocket runs",
		`write each command as a list of strings, for example commands = [["apiclient", "ephemeral-storage", "init"]]`)
}

// stringList is v as a list of strings.
func stringList(v any) ([]string, bool) {
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}
