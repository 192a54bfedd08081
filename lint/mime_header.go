package lint

import (
	"fmt"
	"net/textproto"
	"strings"
)

// readHeader reads "Name: value" lines (with folded continuation lines)
// from lines[i:] up to a blank line, and returns the header and the index
// after the blank line. part is the 1-based part number, 0 for the
// top-level header; it only names the header in errors (headerName).
func readHeader(lines []string, i, part int) (textproto.MIMEHeader, int, error) {
	h := textproto.MIMEHeader{}
	last := ""
	for ; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" {
			return h, i + 1, nil
		}
		if l[0] == ' ' || l[0] == '\t' {
			if last == "" {
				return nil, 0, &ParseError{Format: "MIME", Line: i + 1, Msg: fmt.Sprintf("continuation line %q before any header in %s", clip(l), headerName(part))}
			}
			vs := h[last]
			vs[len(vs)-1] += " " + strings.TrimSpace(l)
			continue
		}
		name, value, ok := strings.Cut(l, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, 0, &ParseError{Format: "MIME", Line: i + 1, Msg: fmt.Sprintf("%q in %s is not a 'Name: value' header; a blank line must separate headers from the body", clip(l), headerName(part))}
		}
		last = textproto.CanonicalMIMEHeaderKey(name)
		h.Add(last, strings.TrimSpace(value))
	}
	return nil, 0, &ParseError{Format: "MIME", Line: len(lines), Msg: fmt.Sprintf("%s is not followed by a blank line", headerName(part))}
}

// headerName names a header block in errors: "the MIME header" (part 0) or
// "part N header". It is only called on failure, so that parsing a valid
// document does not format names it never uses.
func headerName(part int) string {
	if part == 0 {
		return "the MIME header"
	}
	return fmt.Sprintf("part %d header", part)
}

// readPartHeader reads a part header starting at lines[i]. A part may have
// no header at all (its first line is blank).
func readPartHeader(lines []string, i, n int, isDelim func(string) (bool, bool)) (textproto.MIMEHeader, int, error) {
	for j := i; j < len(lines); j++ {
		l := lines[j]
		if strings.TrimSpace(l) == "" {
			break
		}
		if d, c := isDelim(l); d || c {
			return nil, 0, &ParseError{Format: "MIME", Line: j + 1, Msg: fmt.Sprintf("%s is not followed by a blank line before the next delimiter", headerName(n))}
		}
		if name, _, ok := strings.Cut(l, ":"); l[0] != ' ' && l[0] != '\t' && (!ok || name == "" || strings.ContainsAny(name, " \t")) {
			return nil, 0, &ParseError{Format: "MIME", Line: j + 1, Msg: fmt.Sprintf("%q in %s is not a 'Name: value' header; a blank line must separate a part's headers from its body", clip(l), headerName(n))}
		}
	}
	return readHeader(lines, i, n)
}

// headerLine returns the 1-based line of the first header named lname
// (lower case) in lines[from:to], or from+1 when absent.
func headerLine(lines []string, from, to int, lname string) int {
	for k := from; k < to && k < len(lines); k++ {
		if name, _, ok := strings.Cut(lines[k], ":"); ok && strings.EqualFold(strings.TrimSpace(name), lname) {
			return k + 1
		}
	}
	return from + 1
}

// LooksLikeMIME reports whether text starts (after blank lines) with a
// MIME-Version or a multipart Content-Type header: the test the autoscaler
// uses to choose between merging MIME and wrapping a plain script.
func LooksLikeMIME(text string) bool { return looksLikeMIME(text) }

func looksLikeMIME(text string) bool {
	for _, l := range eachLine(text) {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		lt := strings.ToLower(t)
		return strings.HasPrefix(lt, "mime-version:") ||
			(strings.HasPrefix(lt, "content-type:") && strings.Contains(lt, "multipart/"))
	}
	return false
}
