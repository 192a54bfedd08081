package lint

import (
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// pidOf returns the agent whose PID w expands to, or "".
func (fs *fileScan) pidOf(w *syntax.Word) string {
	if agent := pidLookup(w); agent != "" {
		return agent
	}
	agent := ""
	syntax.Walk(w, func(n syntax.Node) bool {
		if p, ok := n.(*syntax.ParamExp); ok && p.Param != nil && fs.pidVars[p.Param.Value] != "" {
			agent = fs.pidVars[p.Param.Value]
		}
		return agent == ""
	})
	return agent
}

// pidLookup returns the agent whose PID a command substitution in w
// prints: $(pidof kubelet), $(pgrep -f containerd), $(cat
// /run/containerd/containerd.pid), $(systemctl show -p MainPID kubelet).
func pidLookup(w *syntax.Word) string {
	agent := ""
	syntax.Walk(w, func(n syntax.Node) bool {
		cs, ok := n.(*syntax.CmdSubst)
		if !ok {
			return agent == ""
		}
		syntax.Walk(cs, func(n syntax.Node) bool {
			call, ok := n.(*syntax.CallExpr)
			if !ok || len(call.Args) == 0 {
				return agent == ""
			}
			switch path.Base(call.Args[0].Lit()) {
			case "pidof", "pgrep", "cat", "systemctl", "head", "tail":
				for _, a := range call.Args[1:] {
					if ag := agentMentioned(a.Lit()); ag != "" {
						agent = ag
					}
				}
			}
			return agent == ""
		})
		return agent == ""
	})
	return agent
}

// agentMentioned returns the node agent whose name s contains, or "".
func agentMentioned(s string) string {
	for _, a := range []string{"kubelet", "containerd"} {
		if strings.Contains(s, a) {
			return a
		}
	}
	return ""
}

// restartWhat names what the command name args does to kubelet,
// containerd or the machine, or returns "".
func restartWhat(name string, args []arg) string {
	switch name {
	case "reboot", "poweroff", "halt":
		for _, a := range args {
			if a.is("-w", "--wtmp-only", "--help", "--version") {
				return ""
			}
		}
		return name
	case "shutdown":
		for _, a := range args {
			if a.is("-c", "-k", "--help", "--show") {
				return ""
			}
		}
		return strings.TrimSpace("shutdown " + joinFirst(args))
	case "kexec":
		exec, load := false, false
		for _, a := range args {
			switch {
			case a.is("-e", "--exec", "-f", "--force"):
				exec = true
			case a.is("-l", "--load", "-p", "--load-panic", "-u", "--unload", "-S", "--status", "-h", "--help", "-v", "--version"):
				load = true
			}
		}
		if exec || !load {
			return "kexec"
		}
	case "init", "telinit":
		if n := operandsOf(args); len(n) > 0 && n[0].is("0", "6", "1", "s", "S", "single") {
			return name + " " + n[0].first()
		}
	case "systemctl":
		return systemctlWhat(args)
	case "service", "invoke-rc.d", "rc-service", "initctl":
		n := operandsOf(args)
		if name == "initctl" && len(n) >= 2 {
			n = []arg{n[1], n[0]} // initctl stop kubelet
		}
		if len(n) >= 2 {
			if agent := isAgentUnit(n[0]); agent != "" {
				for _, v := range n[1].vals {
					if agentActions[v] {
						return name + " " + agent + " " + v
					}
				}
			}
		}
	case "kubelet", "containerd":
		// /etc/init.d/kubelet restart
		if n := operandsOf(args); len(n) == 1 {
			for _, v := range n[0].vals {
				if agentActions[v] {
					return name + " " + v
				}
			}
		}
	case "kill":
		if signalZero(args) {
			return ""
		}
		for _, a := range args {
			if a.pid != "" {
				return "kill " + a.pid
			}
		}
	case "pkill", "killall", "skill":
		return pkillWhat(name, args)
	case "killall5":
		if !signalZero(args) {
			return "killall5"
		}
	case "busctl", "dbus-send", "gdbus", "qdbus":
		return dbusWhat(name, args)
	}
	return ""
}

var agentActions = setOf("stop", "restart", "force-reload", "condrestart", "try-restart", "force-stop", "zap")

func joinFirst(args []arg) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = strings.ReplaceAll(a.first(), unknown, "…")
	}
	return strings.Join(parts, " ")
}

// signalZero reports a kill that only probes (kill -0, -s 0) or lists
// signals (-l, -L).
func signalZero(args []arg) bool {
	for i, a := range args {
		switch {
		case a.is("-0", "-l", "-L", "--list", "--signal=0", "-SIG0"):
			return true
		case a.is("-s", "-n", "--signal") && i+1 < len(args) && args[i+1].is("0"):
			return true
		}
	}
	return false
}

// isAgentUnit returns the agent a unit name or glob names (kubelet,
// kubelet.service, containerd.service, 'kube*'), or "".
func isAgentUnit(a arg) string {
	for _, v := range a.vals {
		if strings.Contains(v, unknown) {
			continue
		}
		u := v
		for _, suf := range []string{".service", ".socket", ".scope"} {
			u = strings.TrimSuffix(u, suf)
		}
		for _, agent := range []string{"kubelet", "containerd"} {
			if u == agent {
				return agent
			}
			if strings.ContainsAny(v, "*?[") {
				if ok, _ := path.Match(v, agent+".service"); ok {
					return agent
				}
				if ok, _ := path.Match(v, agent); ok {
					return agent
				}
			}
		}
	}
	return ""
}

// Systemd knowledge (systemctl(1), systemd.special(7)).
var (
	// systemctl verbs that stop, kill, restart or keep a unit from running.
	systemctlAgentVerbs = setOf("restart", "stop", "kill", "try-restart", "reload-or-restart", "try-reload-or-restart",
		"condrestart", "force-reload", "mask", "freeze", "disable", "clean", "reenable")
	// systemctl verbs that take the whole machine down or out of service.
	systemctlPowerVerbs = setOf("reboot", "poweroff", "halt", "kexec", "soft-reboot", "rescue", "emergency",
		"suspend", "hibernate", "hybrid-sleep", "suspend-then-hibernate", "sleep", "exit", "switch-root")
	// systemctl verbs that start (or make default) a unit: with a
	// power-state target they reboot or stop the node.
	systemctlStartVerbs = setOf("start", "restart", "isolate", "reload-or-restart", "try-restart", "set-default", "enable", "try-reload-or-restart")
	// power-state units, without their .target/.service suffix.
	powerUnits = setOf("reboot", "poweroff", "halt", "kexec", "soft-reboot", "ctrl-alt-del", "rescue", "emergency",
		"shutdown", "final", "suspend", "hibernate", "hybrid-sleep", "suspend-then-hibernate", "sleep",
		"systemd-reboot", "systemd-poweroff", "systemd-halt", "systemd-kexec", "systemd-soft-reboot",
		"systemd-suspend", "systemd-hibernate", "exit", "systemd-exit")
	// systemctl options that take a value as the next word.
	systemctlValued = setOf("-t", "--type", "-p", "--property", "-s", "--signal", "-H", "--host", "-M", "--machine",
		"-n", "--lines", "-o", "--output", "--job-mode", "--root", "--kill-whom", "--kill-value", "--what",
		"--boot-loader-menu", "--boot-loader-entry", "--reboot-argument", "--timestamp", "--message", "--state",
		"--preset-mode", "--image", "--drop-in", "--when", "--image-policy", "--check-inhibitors")
)

func systemctlWhat(args []arg) string {
	var verb string
	var units []arg
	now := false
	for i := 0; i < len(args); i++ {
		v := args[i].first()
		switch {
		case v == "--now":
			now = true
		case strings.HasPrefix(v, "-"):
			if systemctlValued[v] && i+1 < len(args) {
				i++
			}
		case verb == "":
			verb = v
		default:
			units = append(units, args[i])
		}
	}
	_ = now
	if systemctlPowerVerbs[verb] {
		return "systemctl " + verb
	}
	if systemctlStartVerbs[verb] {
		for _, u := range units {
			for _, v := range u.vals {
				base := strings.TrimSuffix(strings.TrimSuffix(v, ".target"), ".service")
				if powerUnits[base] {
					if verb == "enable" {
						continue // enabling a target does not start it
					}
					return "systemctl " + verb + " " + v
				}
			}
		}
	}
	if systemctlAgentVerbs[verb] {
		for _, u := range units {
			if agent := isAgentUnit(u); agent != "" {
				return "systemctl " + verb + " " + agent
			}
		}
	}
	return ""
}

// pkillWhat judges pkill PATTERN, killall NAME (-r REGEX) and skill.
func pkillWhat(name string, args []arg) string {
	if signalZero(args) {
		return ""
	}
	valued := setOf("-s", "--signal", "-u", "-U", "-G", "-g", "-P", "-t", "--euid", "--uid", "--group", "--pgroup",
		"--parent", "--terminal", "--session", "--ns", "--nslist", "-o", "-y", "--older-than", "--younger-than", "--user", "-n", "-c", "--context", "--cgroup")
	regex, exact, full, ignoreCase := name == "pkill", name == "killall" || name == "skill", false, false
	var patterns []arg
	for i := 0; i < len(args); i++ {
		v := args[i].first()
		switch {
		case v == "-F" || v == "--pidfile":
			if i+1 < len(args) {
				if ag := agentMentioned(args[i+1].first()); ag != "" {
					return name + " -F " + args[i+1].first()
				}
				i++
			}
		case v == "-r" || v == "--regexp":
			regex, exact = true, false
		case v == "-x" || v == "--exact":
			exact = true
		case v == "-f" || v == "--full":
			full = true
		case v == "-I" || v == "--ignore-case" || v == "-i" && name == "pkill":
			ignoreCase = true
		case strings.HasPrefix(v, "-"):
			if valued[v] && i+1 < len(args) {
				i++
			}
		default:
			patterns = append(patterns, args[i])
		}
	}
	for _, p := range patterns {
		for _, v := range p.vals {
			if strings.Contains(v, unknown) {
				continue
			}
			for _, agent := range []string{"kubelet", "containerd"} {
				if processMatches(v, agent, regex, exact, full, ignoreCase) {
					return name + " " + v
				}
			}
		}
	}
	return ""
}

// processMatches reports whether pkill/killall's pattern selects the
// agent's process (name "kubelet", command line "/usr/bin/kubelet …").
func processMatches(pattern, agent string, regex, exact, full, ignoreCase bool) bool {
	subjects := []string{agent}
	if full {
		subjects = append(subjects, "/usr/bin/"+agent+" --config /etc/"+agent)
	}
	if !regex {
		if ignoreCase {
			return strings.EqualFold(pattern, agent) || strings.EqualFold(path.Base(pattern), agent)
		}
		return pattern == agent || path.Base(pattern) == agent
	}
	expr := pattern
	if exact {
		expr = "^(" + expr + ")$"
	}
	if ignoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return strings.Contains(pattern, agent)
	}
	for _, s := range subjects {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// dbusWhat judges D-Bus calls to logind's Reboot/PowerOff/Halt and to
// systemd's StopUnit/RestartUnit/KillUnit of an agent (org.freedesktop.
// login1.Manager and org.freedesktop.systemd1.Manager, systemd's D-Bus API).
func dbusWhat(name string, args []arg) string {
	methods := setOf("Reboot", "PowerOff", "Halt", "KExec", "SoftReboot", "RebootWithFlags", "PowerOffWithFlags", "HaltWithFlags", "KExecWithFlags", "SoftRebootWithFlags", "Suspend", "Hibernate")
	unitMethods := setOf("StopUnit", "RestartUnit", "KillUnit", "TryRestartUnit", "ReloadOrRestartUnit", "MaskUnitFiles", "DisableUnitFiles")
	power, unitCall := "", false
	for _, a := range args {
		v := a.first()
		m := v[strings.LastIndexByte(v, '.')+1:]
		switch {
		case methods[m] && (methods[v] || strings.Contains(v, "login1") || strings.Contains(v, "systemd1")):
			power = m
		case unitMethods[m]:
			unitCall = true
		}
	}
	if power != "" {
		return name + " " + power
	}
	if unitCall {
		for _, a := range args {
			v := strings.TrimPrefix(a.first(), "string:")
			if ag := isAgentUnit(arg{vals: []string{v}}); ag != "" {
				return name + " stop/restart " + ag
			}
		}
	}
	return ""
}
