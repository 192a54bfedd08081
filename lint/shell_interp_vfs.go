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
	"mvdan.cc/sh/v3/syntax"
)

// file returns the virtual file at p, its content made from the buffer
// of a file written through the open handler (vbuf.text).
func (sb *sandbox) file(p string) (vfile, bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	vf, ok := sb.files[p]
	if ok && vf.live != nil {
		vf.content = vf.live.text()
	}
	return vf, ok
}

// vbuf is the content of a file written through the open handler: writes
// append to b in place (amortised constant time a byte, whatever the
// number of writes and of appending opens), and the string readers get is
// made from b once after each change (text). Guarded by sandbox.mu.
type vbuf struct {
	b     []byte
	s     string
	stale bool
}

func (v *vbuf) text() string {
	if v.stale {
		v.s, v.stale = string(v.b), false
	}
	return v.s
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

// appendFile appends text to the file at p (creating it), written at
// line, in place as the open handler's writers do (vfsWriter), counting
// the bytes of text against maxInterpBytes.
func (sb *sandbox) appendFile(p, text string, line int) error {
	sb.mu.Lock()
	vf, ok := sb.files[p]
	buf := vf.live
	if buf == nil {
		buf = &vbuf{}
		if ok {
			buf.b = []byte(vf.content)
		}
	}
	over := len(buf.b)+len(text) > maxInterpBytes
	if !over {
		buf.b = append(buf.b, text...)
		buf.stale = true
		sb.files[p] = vfile{line: line, live: buf}
	}
	sb.mu.Unlock()
	if over {
		return sb.halt(fmt.Sprintf("it writes a file larger than %d bytes", maxInterpBytes))
	}
	return sb.charge(len(text))
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
		return newVFSWriter(r, p, r.line(hc.Pos), flag&os.O_APPEND != 0), nil
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

// vfsWriter writes a virtual file: every write appends to the file's
// buffer in place, so that a script's many small writes cost their bytes
// (not the file's size each), and the file is seen at every moment,
// closed or not.
type vfsWriter struct {
	r     *run
	path  string
	buf   *vbuf
	line  int
	wrote bool
}

// newVFSWriter opens p for writing at line: the file is replaced by an
// empty one, or, when appendTo, kept and written at its end. The file is
// on the virtual file system from the open on, as the shell's redirection
// creates (or truncates) it before the command runs, so that a file left
// open is still seen.
func newVFSWriter(r *run, p string, line int, appendTo bool) *vfsWriter {
	sb := r.sb
	sb.mu.Lock()
	defer sb.mu.Unlock()
	vf, ok := sb.files[p]
	buf := &vbuf{stale: true}
	switch {
	case appendTo && ok && vf.live != nil:
		buf = vf.live
	case appendTo && ok:
		buf.b = []byte(vf.content)
	}
	sb.files[p] = vfile{line: line, live: buf}
	return &vfsWriter{r: r, path: p, buf: buf, line: line}
}

func (w *vfsWriter) Read([]byte) (int, error) { return 0, io.EOF }

// Write appends p to the file and counts its bytes against the run's
// bound (maxInterpBytes); a file larger than the bound stops the run.
func (w *vfsWriter) Write(p []byte) (int, error) {
	sb := w.r.sb
	sb.mu.Lock()
	over := len(w.buf.b)+len(p) > maxInterpBytes
	if !over {
		w.buf.b = append(w.buf.b, p...)
		w.buf.stale = true
		if !w.wrote {
			// The interpreter opens a redirection's file before the
			// command's line is known (open has no position); the first
			// write happens within the command.
			w.wrote = true
			w.line = w.r.line(syntax.Pos{})
			if vf, ok := sb.files[w.path]; ok && vf.live == w.buf {
				vf.line = w.line
				sb.files[w.path] = vf
			}
		}
	}
	sb.mu.Unlock()
	if over {
		return 0, sb.halt(fmt.Sprintf("it writes a file larger than %d bytes", maxInterpBytes))
	}
	if err := sb.charge(len(p)); err != nil {
		return 0, err
	}
	if w.path == "/proc/sysrq-trigger" && sysrqDangerous(string(p)) {
		sb.add(RuleUserDataNodeRestart, w.line, "a write to /proc/sysrq-trigger"+w.r.suffix())
	}
	return len(p), nil
}

// Close leaves the file as written: its content is already on the
// virtual file system.
func (w *vfsWriter) Close() error { return nil }

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
