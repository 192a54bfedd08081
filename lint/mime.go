package lint

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"iter"
	"mime"
	"mime/quotedprintable"
	"net/textproto"
	"strings"
)

// ParseError is a userData parse failure. Line is 1-based within
// spec.userData (0 when the error is about the whole text).
type ParseError struct {
	// Format is what was being parsed: "MIME", "NodeConfig", "TOML",
	// "PowerShell".
	Format string
	// Line is the 1-based line in spec.userData, or 0.
	Line int
	// Msg says what is wrong.
	Msg string
}

// Error implements error: "MIME line 4: part 1 header ... ".
func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s line %d: %s", e.Format, e.Line, e.Msg)
	}
	return e.Format + ": " + e.Msg
}

// MIMEDocument is a parsed MIME multipart userData document (RFC 2046).
type MIMEDocument struct {
	// Header is the top-level header.
	Header textproto.MIMEHeader
	// MediaType is the top-level media type, "multipart/mixed" usually.
	MediaType string
	// Boundary is the boundary parameter of the top-level Content-Type.
	Boundary string
	// Parts are the body parts in order.
	Parts []MIMEPart
	// Closed is true when the document ends with a closing delimiter
	// ("--boundary--") rather than a bare last delimiter.
	Closed bool
}

// MIMEPart is one body part.
type MIMEPart struct {
	// Header is the part header.
	Header textproto.MIMEHeader
	// MediaType is the part's media type in lower case ("text/x-shellscript",
	// "application/node.eks.aws"); "text/plain" when the part has no
	// Content-Type, as RFC 2045 section 5.2 specifies.
	MediaType string
	// HeaderLine is the 1-based line of the part's delimiter.
	HeaderLine int
	// BodyLine is the 1-based line where the body starts.
	BodyLine int
	// Body is the body after undoing any Content-Transfer-Encoding.
	Body string
	// Encoded is true when Body was decoded from base64 or
	// quoted-printable, so that its lines do not map one-to-one onto the
	// userData lines (findings then point at BodyLine).
	Encoded bool
}

// maxBoundaryLength is the longest boundary RFC 2046 section 5.1.1 allows.
const maxBoundaryLength = 70

// ParseMIME parses a MIME multipart document strictly, the way the autoscaler
// (and upstream Karpenter, with Go's mime/multipart) must read it to merge
// its own bootstrap part: a header block ended by a blank line, with a
// MIME-Version header and a multipart Content-Type carrying a boundary; at
// least one part, each part's headers ended by a blank line; and a closing
// "--boundary--" line, or a last "--boundary" line followed by nothing,
// which Go's mime/multipart also reads as the end. Lines may end in LF or
// CRLF. On failure it returns a *ParseError naming the line.
func ParseMIME(text string) (*MIMEDocument, error) {
	return parseMIME(text, true)
}

// parseMIME parses; strict=false accepts a missing closing delimiter (what
// cloud-init, which reads a Custom family's userData unmerged, tolerates).
func parseMIME(text string, strict bool) (*MIMEDocument, error) {
	lines := splitLines(text)
	perr := func(line int, format string, args ...any) error {
		return &ParseError{Format: "MIME", Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i == len(lines) {
		return nil, perr(0, "empty document")
	}
	header, next, err := readHeader(lines, i, 0)
	if err != nil {
		return nil, err
	}
	i = next
	if strict && header.Get("MIME-Version") == "" {
		return nil, perr(i, "no MIME-Version header; start the document with 'MIME-Version: 1.0' (RFC 2045), which is how the autoscaler recognises MIME userData")
	}
	ct := header.Get("Content-Type")
	ctLine := headerLine(lines, 0, next, "content-type")
	if ct == "" {
		return nil, perr(ctLine, "no Content-Type header; add 'Content-Type: multipart/mixed; boundary=\"BOUNDARY\"'")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return nil, perr(ctLine, "Content-Type %q does not parse: %v", ct, err)
	}
	if !strings.HasPrefix(mt, "multipart/") {
		return nil, perr(ctLine, "Content-Type is %q; userData in MIME form must be multipart/mixed", mt)
	}
	boundary := params["boundary"]
	if boundary == "" {
		return nil, perr(ctLine, "Content-Type has no boundary parameter; add boundary=\"BOUNDARY\"")
	}
	if len(boundary) > maxBoundaryLength {
		return nil, perr(ctLine, "boundary is %d characters; RFC 2046 allows at most %d", len(boundary), maxBoundaryLength)
	}
	doc := &MIMEDocument{Header: header, MediaType: mt, Boundary: boundary}
	delim, closeDelim := "--"+boundary, "--"+boundary+"--"
	isDelim := func(l string) (isDelim, isClose bool) {
		l = strings.TrimRight(l, " \t")
		return l == delim, l == closeDelim
	}

	// Preamble: everything before the first delimiter.
	for i < len(lines) {
		d, c := isDelim(lines[i])
		if c {
			return nil, perr(i+1, "closing delimiter %q before any part", closeDelim)
		}
		if d {
			break
		}
		i++
	}
	if i == len(lines) {
		return nil, perr(ctLine, "boundary %q never appears; each part must start with a line %q", boundary, delim)
	}
	for i < len(lines) {
		// lines[i] is a delimiter line.
		partLine := i + 1
		i++
		if allBlank(lines[i:]) {
			// A delimiter followed only by blank lines ends the document:
			// Go's mime/multipart (which Karpenter uses to merge) reads it
			// as the end of the last part, so it is accepted as written.
			if len(doc.Parts) == 0 {
				return nil, perr(partLine, "no part after delimiter %q", delim)
			}
			return doc, nil
		}
		ph, bodyStart, err := readPartHeader(lines, i, len(doc.Parts)+1, isDelim)
		if err != nil {
			return nil, err
		}
		i = bodyStart
		j := i
		closed, delimited := false, false
		for j < len(lines) {
			d, c := isDelim(lines[j])
			if d || c {
				delimited, closed = true, c
				break
			}
			j++
		}
		part := MIMEPart{Header: ph, HeaderLine: partLine, BodyLine: bodyStart + 1, MediaType: "text/plain"}
		body := strings.Join(lines[bodyStart:j], "\n")
		if pct := ph.Get("Content-Type"); pct != "" {
			pmt, _, err := mime.ParseMediaType(pct)
			if err != nil {
				return nil, perr(headerLine(lines, partLine, bodyStart, "content-type"), "part %d Content-Type %q does not parse: %v", len(doc.Parts)+1, pct, err)
			}
			part.MediaType = pmt
		}
		switch enc := strings.ToLower(strings.TrimSpace(ph.Get("Content-Transfer-Encoding"))); enc {
		case "", "7bit", "8bit", "binary":
			part.Body = body
		case "base64":
			dec, err := base64.StdEncoding.DecodeString(stripSpace(body))
			if err != nil {
				return nil, perr(part.BodyLine, "part %d is marked base64 but its body does not decode: %v", len(doc.Parts)+1, err)
			}
			part.Body, part.Encoded = string(dec), true
		case "quoted-printable":
			dec, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
			if err != nil {
				return nil, perr(part.BodyLine, "part %d is marked quoted-printable but its body does not decode: %v", len(doc.Parts)+1, err)
			}
			part.Body, part.Encoded = string(dec), true
		default:
			return nil, perr(headerLine(lines, partLine, bodyStart, "content-transfer-encoding"), "part %d has unknown Content-Transfer-Encoding %q; use 7bit, base64 or quoted-printable", len(doc.Parts)+1, enc)
		}
		doc.Parts = append(doc.Parts, part)
		if !delimited {
			if strict {
				return nil, perr(len(lines), "no closing delimiter %q after part %d; the autoscaler cannot merge an unterminated MIME document", closeDelim, len(doc.Parts))
			}
			return doc, nil
		}
		if closed {
			doc.Closed = true
			return doc, nil // the rest is the epilogue, which is ignored
		}
		i = j
	}
	return doc, nil
}

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
				return nil, 0, &ParseError{"MIME", i + 1, fmt.Sprintf("continuation line %q before any header in %s", clip(l), headerName(part))}
			}
			vs := h[last]
			vs[len(vs)-1] += " " + strings.TrimSpace(l)
			continue
		}
		name, value, ok := strings.Cut(l, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, 0, &ParseError{"MIME", i + 1, fmt.Sprintf("%q in %s is not a 'Name: value' header; a blank line must separate headers from the body", clip(l), headerName(part))}
		}
		last = textproto.CanonicalMIMEHeaderKey(name)
		h.Add(last, strings.TrimSpace(value))
	}
	return nil, 0, &ParseError{"MIME", len(lines), fmt.Sprintf("%s is not followed by a blank line", headerName(part))}
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
			return nil, 0, &ParseError{"MIME", j + 1, fmt.Sprintf("%s is not followed by a blank line before the next delimiter", headerName(n))}
		}
		if name, _, ok := strings.Cut(l, ":"); l[0] != ' ' && l[0] != '\t' && (!ok || name == "" || strings.ContainsAny(name, " \t")) {
			return nil, 0, &ParseError{"MIME", j + 1, fmt.Sprintf("%q in %s is not a 'Name: value' header; a blank line must separate a part's headers from its body", clip(l), headerName(n))}
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

// looksLikeMIME reports whether text starts (after blank lines) with a
// MIME-Version or a multipart Content-Type header: the test the autoscaler
// uses to choose between merging MIME and wrapping a plain script.
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
