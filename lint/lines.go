package lint

import (
	"bytes"
	"iter"
	"strings"
)

// splitLines splits on LF and drops a trailing CR from each line. A final
// newline does not produce an empty last line.
func splitLines(text string) []string {
	var lines []string
	for _, l := range eachLine(text) {
		if lines == nil {
			lines = make([]string, 0, strings.Count(text, "\n")+1)
		}
		lines = append(lines, l)
	}
	return lines
}

// eachLine yields the lines of text with their 0-based index, as
// splitLines collects them, without allocating a slice.
func eachLine(text string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		rest := strings.TrimSuffix(text, "\n")
		if rest == "" {
			return
		}
		for i := 0; ; i++ {
			l, r, more := strings.Cut(rest, "\n")
			if !yield(i, strings.TrimSuffix(l, "\r")) || !more {
				return
			}
			rest = r
		}
	}
}

func stripSpace(s string) string {
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\n':
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// clip shortens a quoted input line in messages to 40 bytes.
func clip(s string) string { return truncate(s, 40) }

func allBlank(lines []string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			return false
		}
	}
	return true
}
