package headtohead

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Process is a controller binary run in its own process, as a
// Deployment's container runs it, so that its RSS and CPU can be read
// from /proc and it can be killed at an exact point.
type Process struct {
	// Name names the process in logs ("karpx-controller", "karpenter").
	Name    string
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
}

// StartProcess starts binary with args and the test's environment plus
// env, its output to a log file under dir. The process is killed when tb
// ends; if tb failed, the end of its log is shown.
func StartProcess(tb testing.TB, dir, name, binary string, args, env []string) *Process {
	tb.Helper()
	if _, err := os.Stat(binary); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	p := &Process{Name: name, exited: make(chan struct{}), logPath: filepath.Join(dir, name+".log")}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		tb.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	tb.Cleanup(func() {
		p.Kill()
		if tb.Failed() {
			if out, err := os.ReadFile(p.logPath); err == nil {
				tb.Logf("%s log (last 8 KiB):\n%s", name, tail(out, 8<<10))
			}
		}
	})
	return p
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Kill SIGKILLs the process (no chance to finish anything, as in a node
// failure or an OOM kill) and waits until it is gone.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// ForbiddenLines returns the lines of the process's log that report an
// API request refused by RBAC.
func (p *Process) ForbiddenLines() []string {
	out, err := os.ReadFile(p.logPath)
	if err != nil {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, " is forbidden: ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// ErrorLines counts the process's JSON log lines at level error (karpx's
// logr/zap "error", Karpenter's "ERROR"), by message ("msg" or
// "message"); lines that are not JSON are not counted.
func (p *Process) ErrorLines() map[string]int {
	out, err := os.ReadFile(p.logPath)
	if err != nil {
		return nil
	}
	return errorLines(out)
}

// errorLines is ErrorLines of a log's content.
func errorLines(log []byte) map[string]int {
	byMsg := map[string]int{}
	for _, l := range bytes.Split(log, []byte("\n")) {
		if !bytes.Contains(bytes.ToLower(l), []byte(`"level":"error"`)) {
			continue
		}
		var line struct {
			Level   string `json:"level"`
			Msg     string `json:"msg"`
			Message string `json:"message"`
		}
		if json.Unmarshal(l, &line) != nil || !strings.EqualFold(line.Level, "error") {
			continue
		}
		byMsg[line.Msg+line.Message]++
	}
	return byMsg
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
