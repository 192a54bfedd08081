package lint

import (
	"fmt"
	"path"
	"strings"
)

// This file turns the shell model's effects (shell.go) into findings on a
// userData segment: whole shell parts, text that is not valid userData, and
// single commands of a cloud-config module.

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
	if perr.tooDeep {
		return tooDeepFinding(s, i, what+" cannot be read: "+perr.msg)
	}
	return userDataFinding(RuleUserDataParse, s.lineOf(i),
		fmt.Sprintf("%s does not parse (line %d, column %d): %s%s", what, perr.line, perr.col, perr.msg, s.where(i)),
		"fix the shell syntax; check it with bash -n")
}

// tooDeepFinding is the KX009 finding of a script that passed the parser's
// nesting bound (maxShellParseFrames).
func tooDeepFinding(s segment, i int, msg string) Finding {
	return userDataFinding(RuleUserDataUninspectable, s.lineOf(i), msg+s.where(i),
		"nest subshells, substitutions and arithmetic a few levels deep at most; a script karpx cannot parse could hide anything")
}

// scanShellLenient is the shell scan of text that is not valid userData:
// the whole text when it parses, else each line that parses on its own.
func scanShellLenient(s segment) []Finding {
	effects, perr := analyzeShell(s.text)
	switch {
	case perr == nil:
		return effectFindings(s, effects, 0, "")
	case perr.tooDeep:
		return []Finding{shellParseFinding(s, perr, "the text, read as a shell script,")}
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
		case RuleUserDataUninspectable:
			out = append(out, tooDeepFinding(s, i, e.what+strings.TrimPrefix(where, s.where(i))))
		case ruleSwapOn:
			// Judged by resolveSwap against kubelet's failSwapOn.
			out = append(out, Finding{RuleID: ruleSwapOn, Field: "spec.userData", Line: s.lineOf(i), Message: e.what + where})
		case ruleFileSecret:
			f := *e.finding
			f.Line = s.lineOf(i)
			f.Message = fmt.Sprintf("writes %s, which %s (line %d of the file)%s", e.what, f.Message, e.finding.Line, where)
			out = append(out, f)
		case ruleUnresolved:
			f := userDataFinding(RuleUserDataUninspectable, s.lineOf(i),
				"karpx cannot determine a command the node will run: "+e.what+where,
				"spell the command and the scripts it runs literally in spec.userData; karpx refuses what it cannot determine (docs/rules.md, \"The principle\")")
			f.unresolved = true
			out = append(out, f)
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
