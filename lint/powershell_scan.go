package lint

import "strings"

// This file holds what karpx reads in PowerShell beyond one command per
// line: block comments, which are not commands, and the aliases and
// WMI/CIM methods that stop kubelet or restart Windows, which are.

// powerShellAgentStoppers are the cmdlets, their built-in aliases
// (Get-Alias on Windows PowerShell 5.1: spsv is Stop-Service, kill and
// spps are Stop-Process) and the programs that stop a service or a
// process named on the same line.
var powerShellAgentStoppers = setOf("restart-service", "stop-service", "suspend-service", "spsv",
	"stop-process", "spps", "kill", "taskkill", "taskkill.exe")

// powerShellWMIRestart returns what a line of PowerShell code (comments
// removed, lower case) does to the node through WMI or CIM, or "": the
// Reboot, Shutdown and Win32Shutdown(Tracker) methods of
// Win32_OperatingSystem, and Win32_Service's StopService and PauseService
// on kubelet or containerd (Microsoft Learn, "Win32_OperatingSystem
// class" and "Win32_Service class" methods), called as .Method() on
// Get-WmiObject/Get-CimInstance output or through Invoke-WmiMethod and
// Invoke-CimMethod.
func powerShellWMIRestart(code string) string {
	switch {
	case strings.Contains(code, "win32_operatingsystem") && (strings.Contains(code, "reboot") || strings.Contains(code, "shutdown")):
		return "Win32_OperatingSystem Reboot/Shutdown (WMI/CIM)"
	case strings.Contains(code, "win32_service") && (strings.Contains(code, "stopservice") || strings.Contains(code, "pauseservice")):
		if strings.Contains(code, "kubelet") || strings.Contains(code, "containerd") {
			return "Win32_Service StopService of " + agentIn(code) + " (WMI/CIM)"
		}
	}
	return ""
}

// blankPowerShellBlockComments returns text with each <# … #> block
// comment replaced by spaces (its newlines kept, so that line numbers do
// not move). It follows single- and double-quoted strings and # line
// comments, so that <# inside them starts nothing; at a double-quoted
// string with a $( subexpression, whose nested quotes it does not follow,
// it stops and blanks no comment after it, so that a comment is never
// guessed where PowerShell sees code.
func blankPowerShellBlockComments(text string) string {
	if !strings.Contains(text, "<#") {
		return text
	}
	b := []byte(text)
	const (
		code = iota
		single
		double
		line
		block
	)
	state, start := code, 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch state {
		case code:
			switch {
			case c == '\'':
				state = single
			case c == '"':
				state = double
			case c == '<' && i+1 < len(b) && b[i+1] == '#':
				state, start = block, i
				i++
			case c == '#':
				state = line
			case c == '`':
				i++ // an escaped character
			}
		case single:
			if c == '\'' {
				state = code // '' is an escaped quote: leaves and re-enters
			}
		case double:
			switch {
			case c == '`':
				i++
			case c == '$' && i+1 < len(b) && b[i+1] == '(':
				return string(b) // the comments before it, and no more
			case c == '"':
				state = code
			}
		case line:
			if c == '\n' {
				state = code
			}
		case block:
			if c == '#' && i+1 < len(b) && b[i+1] == '>' {
				for j := start; j <= i+1; j++ {
					if b[j] != '\n' {
						b[j] = ' '
					}
				}
				state = code
				i++
			}
		}
	}
	if state == block || state == single || state == double {
		return text // unterminated: PowerShell refuses the script; scan it all
	}
	return string(b)
}
