package lint

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
)

// file returns the virtual file at p.
func (sb *sandbox) file(p string) (vfile, bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	vf, ok := sb.files[p]
	return vf, ok
}

// writeFile stores content at p, written at line.
func (sb *sandbox) writeFile(p, content string, line int) error {
	if err := sb.charge(len(content)); err != nil {
		return err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.files[p] = vfile{content: content, line: line}
	return nil
}

func absPath(dir, p string) string {
	if !path.IsAbs(p) {
		p = path.Join(dir, p)
	}
	return path.Clean(p)
}

// readAll reads a command's standard input, at most maxInterpBytes.
func (sb *sandbox) readAll(in io.Reader) (string, error) {
	if in == nil {
		return "", nil
	}
	b, err := io.ReadAll(io.LimitReader(in, maxInterpBytes+1))
	if len(b) > maxInterpBytes {
		return "", sb.halt(fmt.Sprintf("a command reads more than %d bytes", maxInterpBytes))
	}
	if err := sb.charge(len(b)); err != nil {
		return "", err
	}
	return string(b), err
}

// open is the open handler: writes go to the virtual file system, reads
// come from it, or are a taint mark for a file karpx did not see written.
func (r *run) open(ctx context.Context, p string, flag int, _ os.FileMode) (io.ReadWriteCloser, error) {
	sb := r.sb
	hc := interp.HandlerCtx(ctx)
	p = absPath(hc.Dir, p)
	switch p {
	case "/dev/null":
		return nopFile{Reader: strings.NewReader("")}, nil
	case "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/console", "/dev/kmsg":
		return nopFile{Reader: strings.NewReader(""), w: hc.Stdout}, nil
	case procSubstInput:
		return nopFile{Reader: strings.NewReader(sb.mark("what the script writes to a >(…) process substitution"))}, nil
	}
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		prev := ""
		if vf, ok := sb.file(p); ok && flag&os.O_APPEND != 0 {
			prev = vf.content
		}
		return &vfsWriter{r: r, path: p, buf: []byte(prev), line: r.line(hc.Pos)}, nil
	}
	if vf, ok := sb.file(p); ok {
		return nopFile{Reader: strings.NewReader(vf.content)}, nil
	}
	return nopFile{Reader: strings.NewReader(sb.mark("the file " + p))}, nil
}

// nopFile is a read-only (or stdout-forwarding) file of the sandbox.
type nopFile struct {
	io.Reader
	w io.Writer
}

func (f nopFile) Write(p []byte) (int, error) {
	if f.w == nil {
		return len(p), nil
	}
	return f.w.Write(p)
}

func (nopFile) Close() error { return nil }

// vfsWriter collects what is written to a virtual file and stores it on
// every write, so that a file left open is still seen.
type vfsWriter struct {
	r    *run
	path string
	buf  []byte
	line int
}

func (w *vfsWriter) Read([]byte) (int, error) { return 0, io.EOF }

func (w *vfsWriter) Write(p []byte) (int, error) {
	if len(w.buf)+len(p) > maxInterpBytes {
		return 0, w.r.sb.halt(fmt.Sprintf("it writes a file larger than %d bytes", maxInterpBytes))
	}
	w.buf = append(w.buf, p...)
	if err := w.r.sb.writeFile(w.path, string(w.buf), w.line); err != nil {
		return 0, err
	}
	if w.path == "/proc/sysrq-trigger" && sysrqDangerous(string(p)) {
		w.r.sb.add(RuleUserDataNodeRestart, w.line, "a write to /proc/sysrq-trigger"+w.r.suffix())
	}
	return len(p), nil
}

func (w *vfsWriter) Close() error {
	if len(w.buf) == 0 {
		return w.r.sb.writeFile(w.path, "", w.line)
	}
	return nil
}

// stat answers for the files the script wrote; every other path does not
// exist in the sandbox.
func (r *run) stat(ctx context.Context, name string, _ bool) (fs.FileInfo, error) {
	if vf, ok := r.sb.file(absPath(interp.HandlerCtx(ctx).Dir, name)); ok {
		return vfileInfo{name: path.Base(name), size: int64(len(vf.content))}, nil
	}
	return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
}

func (r *run) access(ctx context.Context, name string, _ interp.AccessMode) error {
	if _, ok := r.sb.file(absPath(interp.HandlerCtx(ctx).Dir, name)); ok {
		return nil
	}
	return &os.PathError{Op: "access", Path: name, Err: os.ErrNotExist}
}

type vfileInfo struct {
	name string
	size int64
}

func (i vfileInfo) Name() string       { return i.name }
func (i vfileInfo) Size() int64        { return i.size }
func (i vfileInfo) Mode() fs.FileMode  { return 0o755 }
func (i vfileInfo) ModTime() time.Time { return time.Time{} }
func (i vfileInfo) IsDir() bool        { return false }
func (i vfileInfo) Sys() any           { return nil }

// sandboxEnv is the environment a script starts with: the few variables
// cloud-init's scripts have (PATH, HOME, …), and a taint mark for any
// other name that looks like an environment variable, since karpx cannot
// know it. The shell's own variables (IFS, OPTIND, PS4, …) are unset.
type sandboxEnv struct{ sb *sandbox }

var sandboxVars = map[string]string{
	"PATH":  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME":  "/root",
	"USER":  "root",
	"SHELL": "/bin/bash",
	"IFS":   " \t\n",
	"LANG":  "C.UTF-8",
	"TERM":  "dumb",
	"PWD":   "/root",
	"UID":   "0",
	"EUID":  "0",
}

// shellVars are names the interpreter itself reads; they start unset.
var shellVars = setOf("OPTIND", "OPTARG", "OPTERR", "PS1", "PS2", "PS3", "PS4", "OLDPWD", "CDPATH", "GLOBIGNORE",
	"RANDOM", "SECONDS", "LINENO", "PPID", "GID", "DIRSTACK", "FUNCNAME", "PIPESTATUS", "REPLY", "HISTFILE",
	"TMOUT", "ENV", "POSIXLY_CORRECT", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "TMPDIR", "DEBIAN_FRONTEND")

func (e sandboxEnv) Get(name string) expand.Variable {
	if v, ok := sandboxVars[name]; ok {
		return expand.Variable{Set: true, Exported: true, Kind: expand.String, Str: v}
	}
	if shellVars[name] || strings.HasPrefix(name, "BASH") || strings.HasPrefix(name, "LC_") || !isEnvName(name) {
		return expand.Variable{}
	}
	return expand.Variable{Set: true, Exported: true, Kind: expand.String, Str: e.sb.mark("the environment variable $" + name)}
}

func (e sandboxEnv) Each(f func(name string, vr expand.Variable) bool) {
	for k, v := range sandboxVars {
		if !f(k, expand.Variable{Set: true, Exported: true, Kind: expand.String, Str: v}) {
			return
		}
	}
}

// isEnvName reports whether name is an upper-case variable name, the
// convention of environment variables (POSIX.1-2017, 8.1); a lower-case
// variable the script does not set is empty, as in the shell.
func isEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
