package lint

import (
	"encoding/base64"
	"fmt"
	"path"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// This file models cloud-config write_files: the content cloud-init
// decodes and writes, and the paths whose content then runs at boot
// (systemd units, cron tables, rc.local, cloud-init's per-boot scripts,
// profile.d), whose commands the shell model then reads.

// scanWriteFile decodes one write_files entry as cloud-init does
// (encoding b64/base64, gz/gzip, gz+b64/gzip+base64/…; cloud-init docs,
// "Write Files") and scans it for secrets, and as a script when its path is
// executed at boot. budget counts what the document's entries
// decompressed to so far, at most MaxDecodedBytes in all (a few kilobytes
// of gzip per entry could otherwise expand to a megabyte each). The
// decoded content is stored in files by path, for the sandbox run of the
// document's commands (cloudConfigFlow).
func scanWriteFile(s segment, j int, f *yaml.Node, idx func(*yaml.Node) int, budget *int, files map[string]string) []Finding {
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
		out, err := gunzip(text, budget)
		if err != nil {
			return []Finding{uninspectable(s, ci, ctx+": encoding "+enc+" but the content does not decompress ("+err.Error()+")")}
		}
		text, decoded = out, true
	}
	if p != "" {
		if app, _ := scalarAt(f, "append"); strings.EqualFold(app, "true") {
			text = files[path.Clean(p)] + text
		}
		files[path.Clean(p)] = text
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
			if err := sub.script(sc, 1, 1); err != nil && err.tooDeep {
				out = append(out, tooDeepFinding(s, ci, fmt.Sprintf("%s (a %s) cannot be read as shell: %s", ctx, kind, err.msg)))
			}
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
