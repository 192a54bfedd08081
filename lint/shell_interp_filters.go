package lint

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/interp"
)

// passTaint writes in's taint mark when in holds one, and reports whether
// it did: a filter over text karpx cannot know gives text karpx cannot
// know.
func (r *run) passTaint(hc interp.HandlerContext, in string) bool {
	if what := r.sb.tainted(in); what != "" {
		_, _ = io.WriteString(hc.Stdout, r.sb.mark(what))
		return true
	}
	return false
}

func (r *run) base64(hc interp.HandlerContext, args []string) error {
	decode := false
	for _, a := range args {
		if a == "-d" || a == "--decode" || a == "-D" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "d")) {
			decode = true
		}
	}
	in, err := r.input(hc, operands(args, setOf("-w", "--wrap")))
	if err != nil || r.passTaint(hc, in) {
		return err
	}
	if !decode {
		_, err = io.WriteString(hc.Stdout, base64.StdEncoding.EncodeToString([]byte(in))+"\n")
		return err
	}
	out, derr := base64.StdEncoding.DecodeString(stripSpace(in))
	if derr != nil {
		return interp.ExitStatus(1)
	}
	if err := r.sb.charge(len(out)); err != nil {
		return err
	}
	_, err = hc.Stdout.Write(out)
	return err
}

func (r *run) gzip(hc interp.HandlerContext, name string, args []string) error {
	decode := name != "gzip"
	for _, a := range args {
		if a == "-d" || a == "--decompress" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "d")) {
			decode = true
		}
	}
	in, err := r.input(hc, operands(args, setOf("-S", "--suffix")))
	if err != nil || r.passTaint(hc, in) {
		return err
	}
	if !decode {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(in))
		_ = zw.Close()
		_, err = hc.Stdout.Write(b.Bytes())
		return err
	}
	decoded := 0
	out, gerr := gunzip(in, &decoded)
	if gerr != nil {
		return interp.ExitStatus(1)
	}
	if err := r.sb.charge(len(out)); err != nil {
		return err
	}
	_, err = io.WriteString(hc.Stdout, out)
	return err
}

// trSet expands a tr(1) set: ranges a-z and the escapes \n, \t, \\.
func trSet(s string) []byte {
	s = strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`, "[:upper:]", "A-Z", "[:lower:]", "a-z", "[:space:]", " \t\n\r\v\f", "[:digit:]", "0-9").Replace(s)
	var out []byte
	for i := 0; i < len(s); i++ {
		if i+2 < len(s) && s[i+1] == '-' && s[i] <= s[i+2] {
			for c := int(s[i]); c <= int(s[i+2]); c++ {
				out = append(out, byte(c))
			}
			i += 2
			continue
		}
		out = append(out, s[i])
	}
	return out
}

func (r *run) tr(hc interp.HandlerContext, args []string) error {
	in, err := r.sb.readAll(hc.Stdin)
	if err != nil || r.passTaint(hc, in) {
		return err
	}
	del, squeeze := false, false
	var sets []string
	for _, a := range args {
		switch {
		case a == "-d" || a == "--delete":
			del = true
		case a == "-s" || a == "--squeeze-repeats":
			squeeze = true
		case strings.HasPrefix(a, "-") && len(a) > 1:
			_, _ = io.WriteString(hc.Stdout, r.sb.mark("the output of tr "+a))
			return nil
		default:
			sets = append(sets, a)
		}
	}
	if len(sets) == 0 {
		return interp.ExitStatus(1)
	}
	var table [256]int
	for i := range table {
		table[i] = i
	}
	from := trSet(sets[0])
	switch {
	case del:
		for _, c := range from {
			table[c] = -1
		}
	case len(sets) > 1:
		to := trSet(sets[1])
		if len(to) == 0 {
			return interp.ExitStatus(1)
		}
		for i, c := range from {
			table[c] = int(to[min(i, len(to)-1)])
		}
	}
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		c := table[in[i]]
		if c < 0 || (squeeze && len(out) > 0 && out[len(out)-1] == byte(c) && !del) {
			continue
		}
		out = append(out, byte(c))
	}
	_, err = hc.Stdout.Write(out)
	return err
}

// sedSubst is a parsed sed s command: s/re/repl/flags.
type sedSubst struct {
	re     *regexp.Regexp
	repl   string
	global bool
}

// parseSedSubst reads sed's s command with any delimiter; regular
// expressions are read as RE2 after turning the basic syntax's \( \) \{ \}
// \+ \? \| into their extended forms. false when script is anything else.
func parseSedSubst(script string, extended bool) (sedSubst, bool) {
	script = strings.TrimSpace(script)
	if len(script) < 4 || script[0] != 's' {
		return sedSubst{}, false
	}
	d := script[1]
	var parts []string
	var cur strings.Builder
	for i := 2; i < len(script); i++ {
		c := script[i]
		if c == '\\' && i+1 < len(script) && script[i+1] == d {
			cur.WriteByte(d)
			i++
			continue
		}
		if c == d {
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(c)
	}
	parts = append(parts, cur.String())
	if len(parts) != 3 || strings.Trim(parts[2], "gI0123456789") != "" {
		return sedSubst{}, false
	}
	pat := parts[0]
	if !extended {
		pat = strings.NewReplacer(`\(`, "(", `\)`, ")", `\{`, "{", `\}`, "}", `\+`, "+", `\?`, "?", `\|`, "|",
			"(", `\(`, ")", `\)`, "{", `\{`, "}", `\}`, "+", `\+`, "?", `\?`, "|", `\|`).Replace(pat)
	}
	if strings.Contains(parts[2], "I") {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return sedSubst{}, false
	}
	repl := strings.NewReplacer(`\1`, "${1}", `\2`, "${2}", `\3`, "${3}", "&", "${0}", `\&`, "&", `\n`, "\n", "$", "$$").Replace(parts[1])
	return sedSubst{re: re, repl: repl, global: strings.Contains(parts[2], "g")}, true
}

func (s sedSubst) apply(text string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		body := strings.TrimSuffix(l, "\n")
		nl := l[len(body):]
		if s.global {
			body = s.re.ReplaceAllString(body, s.repl)
		} else if loc := s.re.FindStringSubmatchIndex(body); loc != nil {
			var dst []byte
			dst = s.re.ExpandString(dst, s.repl, body, loc)
			body = body[:loc[0]] + string(dst) + body[loc[1]:]
		}
		lines[i] = body + nl
	}
	return strings.Join(lines, "")
}

// sed runs sed's s commands (with -e, -E/-r, -i); any other sed program
// gives text karpx cannot know.
func (r *run) sed(hc interp.HandlerContext, args []string, line int) error {
	var scripts, files []string
	inPlace, extended := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-e" || a == "--expression":
			if i+1 < len(args) {
				scripts = append(scripts, args[i+1])
				i++
			}
		case a == "-i" || strings.HasPrefix(a, "-i") || strings.HasPrefix(a, "--in-place"):
			inPlace = true
		case a == "-E" || a == "-r" || a == "--regexp-extended":
			extended = true
		case a == "-n" || a == "-s" || a == "-u" || a == "-z":
			_, _ = io.WriteString(hc.Stdout, r.sb.mark("the output of sed "+a))
			return nil
		case strings.HasPrefix(a, "-") && a != "-":
		default:
			if len(scripts) == 0 && !hasScript(args[:i]) {
				scripts = append(scripts, a)
			} else {
				files = append(files, a)
			}
		}
	}
	var subs []sedSubst
	for _, sc := range scripts {
		for _, part := range strings.Split(sc, "\n") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			s, ok := parseSedSubst(part, extended)
			if !ok {
				return r.sedUnknown(hc, files, inPlace, line)
			}
			subs = append(subs, s)
		}
	}
	edit := func(t string) string {
		for _, s := range subs {
			t = s.apply(t)
		}
		return t
	}
	if inPlace {
		for _, f := range files {
			p := absPath(hc.Dir, f)
			t := r.readFile(hc, f)
			if err := r.sb.writeFile(p, edit(t), line); err != nil {
				return err
			}
		}
		return nil
	}
	in, err := r.input(hc, files)
	if err != nil || r.passTaint(hc, in) {
		return err
	}
	_, err = io.WriteString(hc.Stdout, edit(in))
	return err
}

// hasScript reports whether args (sed's options so far) gave a script
// with -e.
func hasScript(args []string) bool {
	for _, a := range args {
		if a == "-e" || a == "--expression" {
			return true
		}
	}
	return false
}

// sedUnknown is a sed program the sandbox does not model: its output, and
// with -i its files, are text karpx cannot know.
func (r *run) sedUnknown(hc interp.HandlerContext, files []string, inPlace bool, line int) error {
	if inPlace {
		for _, f := range files {
			p := absPath(hc.Dir, f)
			if err := r.sb.writeFile(p, r.sb.mark("the file "+p+" as sed leaves it"), line); err != nil {
				return err
			}
		}
		return nil
	}
	_, err := io.WriteString(hc.Stdout, r.sb.mark("the output of sed"))
	return err
}

// copy runs cp, install, mv and ln (-s) within the virtual file system; a
// link to /dev/null in a systemd directory masks the unit.
func (r *run) copy(hc interp.HandlerContext, name string, args []string, line int) error {
	ops := operands(args, setOf("-m", "--mode", "-o", "--owner", "-g", "--group", "-t", "--target-directory", "-S", "--suffix", "-Z"))
	if len(ops) < 2 {
		return nil
	}
	dst := absPath(hc.Dir, ops[len(ops)-1])
	for _, src := range ops[:len(ops)-1] {
		target := dst
		if strings.HasSuffix(ops[len(ops)-1], "/") || len(ops) > 2 {
			target = path.Join(dst, path.Base(src))
		}
		if src == "/dev/null" {
			if agent := agentMentioned(path.Base(target)); agent != "" && strings.Contains(target, "systemd") {
				r.sb.add(RuleUserDataNodeRestart, line, name+" /dev/null "+target+" masks "+agent+r.suffix())
			}
			continue
		}
		if err := r.sb.writeFile(target, r.readFile(hc, src), line); err != nil {
			return err
		}
	}
	return nil
}
