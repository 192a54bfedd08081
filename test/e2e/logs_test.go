package e2e

import (
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// logLine is one line a component logged.
type logLine struct {
	name string // the logger's name, e.g. "karpx.garbagecollection"
	msg  string
	kv   map[string]string
	text string // everything, for greps
}

// logRecorder keeps every line logged through the sinks it wraps.
type logRecorder struct {
	mu    sync.Mutex
	lines []logLine
}

// wrap returns log with every line also recorded.
func (r *logRecorder) wrap(log logr.Logger) logr.Logger {
	return logr.New(recordingSink{LogSink: log.GetSink(), r: r})
}

// find returns the lines whose message contains msg.
func (r *logRecorder) find(msg string) []logLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logLine
	for _, l := range r.lines {
		if strings.Contains(l.msg, msg) {
			out = append(out, l)
		}
	}
	return out
}

// grep returns the lines that contain s anywhere (name, message, keys,
// values, error).
func (r *logRecorder) grep(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.Contains(l.text, s) {
			out = append(out, l.text)
		}
	}
	return out
}

// len returns the number of lines recorded.
func (r *logRecorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}

// recordingSink records every line and passes it on.
type recordingSink struct {
	logr.LogSink
	r      *logRecorder
	name   string
	values []any
}

func (s recordingSink) record(msg string, err error, kv []any) {
	all := append(append([]any(nil), s.values...), kv...)
	l := logLine{name: s.name, msg: msg, kv: map[string]string{}}
	for i := 0; i+1 < len(all); i += 2 {
		l.kv[fmt.Sprint(all[i])] = fmt.Sprint(all[i+1])
	}
	l.text = fmt.Sprintf("%s %q %v", s.name, msg, all)
	if err != nil {
		l.text += " error=" + err.Error()
	}
	s.r.mu.Lock()
	s.r.lines = append(s.r.lines, l)
	s.r.mu.Unlock()
}

func (s recordingSink) Info(level int, msg string, kv ...any) {
	s.record(msg, nil, kv)
	s.LogSink.Info(level, msg, kv...)
}

func (s recordingSink) Error(err error, msg string, kv ...any) {
	s.record(msg, err, kv)
	s.LogSink.Error(err, msg, kv...)
}

func (s recordingSink) WithValues(kv ...any) logr.LogSink {
	return recordingSink{LogSink: s.LogSink.WithValues(kv...), r: s.r, name: s.name, values: append(append([]any(nil), s.values...), kv...)}
}

func (s recordingSink) WithName(name string) logr.LogSink {
	n := name
	if s.name != "" {
		n = s.name + "." + name
	}
	return recordingSink{LogSink: s.LogSink.WithName(name), r: s.r, name: n, values: s.values}
}
