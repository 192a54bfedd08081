package lint

import (
	"errors"
	"fmt"
	"mime"
	"net/textproto"
	"strconv"
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
	// Uninspectable is true when the text is well-formed enough to reach
	// the node but a part of it cannot be decoded or read (a bad
	// Content-Transfer-Encoding, a corrupt gzip part, binary content, too
	// deep a nesting): it is reported as RuleUserDataUninspectable rather
	// than RuleUserDataParse, for any AMI family, because such a part could
	// hide anything.
	Uninspectable bool
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
	// Content-Type, as RFC 2045 section 5.2 specifies. A gzip part that
	// was decompressed gets the type its content shows ("#!" is
	// text/x-shellscript, a MIME header is multipart/mixed), as cloud-init
	// decides it.
	MediaType string
	// Path is the part's position in the tree: "2" for the second
	// top-level part, "2.1" for the first part nested in it.
	Path string
	// HeaderLine is the 1-based line of the part's delimiter.
	HeaderLine int
	// BodyLine is the 1-based line where the body starts.
	BodyLine int
	// Body is the body after undoing any Content-Transfer-Encoding and
	// gzip compression.
	Body string
	// Encoded is true when Body was decoded (base64, quoted-printable,
	// gzip) here or in an enclosing part, so that its lines do not map
	// one-to-one onto the userData lines (findings then point at BodyLine).
	Encoded bool
	// Compressed is true when Body was gunzipped.
	Compressed bool
	// Parts are the parts of a multipart part (a multipart/* Content-Type,
	// or a gzip part whose content is a MIME document), or the one
	// encapsulated part of a message/rfc822 part, parsed the same way; nil
	// for a leaf.
	Parts []MIMEPart
	// RawHeader is the part's header block as written (lines joined by
	// "\n", without the blank line that ends it); the autoscaler copies
	// it, with RawBody, into the merged document.
	RawHeader string
	// RawBody is the body as written, before any decoding.
	RawBody string
}

// Leaves returns the parts of d that have no nested parts, depth first
// in document order.
func (d *MIMEDocument) Leaves() []MIMEPart {
	var out []MIMEPart
	var walk func([]MIMEPart)
	walk = func(ps []MIMEPart) {
		for _, p := range ps {
			if p.Parts != nil {
				walk(p.Parts)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Parts)
	return out
}

// maxBoundaryLength is the longest boundary RFC 2046 section 5.1.1 allows.
const maxBoundaryLength = 70

// MaxMIMEDepth is how deeply multiparts may nest (the top-level document
// is depth 1). cloud-init has no limit; karpx denies deeper trees, which
// no bootstrap needs, so that walking one costs bounded work.
const MaxMIMEDepth = 8

// MaxDecodedBytes caps what gzip parts may decompress to, in total over
// one userData document: 1 MiB, 64 times EC2's 16 KB userData limit, far
// more than any script and small enough that decompression bombs (one
// large, or thousands of small ones) cost little to reject.
const MaxDecodedBytes = 1 << 20

// MaxGzipLayers is how many gzip-compressed documents may nest in one
// another (a gzip part whose content is a MIME document with a gzip part
// …, or base64 userData of gzip within gzip): 8, as deep as MaxMIMEDepth
// lets multiparts nest. Compression within compression saves nothing, so
// no bootstrap needs it; deeper nesting is refused (KX009, or a KX010
// whose content is not inspected) so that unwrapping costs bounded work.
const MaxGzipLayers = 8

// MaxMIMEParts is how many parts one userData document may have in total,
// at every level: 256. Each part costs a header map and a scan, and the
// decompressed content of gzip parts (up to MaxDecodedBytes) could
// otherwise hold a hundred thousand tiny parts; real bootstraps have a
// handful. More parts are refused (KX009).
const MaxMIMEParts = 256

// gzipTypes are the media types cloud-init decompresses (cloud-init
// documentation, "User data formats": gzip compressed content).
var gzipTypes = map[string]bool{
	"application/gzip": true, "application/gzip-compressed": true, "application/gzipped": true,
	"application/x-compress": true, "application/x-compressed": true, "application/x-gunzip": true,
	"application/x-gzip": true, "application/x-gzip-compressed": true,
}

// ParseMIME parses a MIME multipart document strictly, the way the autoscaler
// (and upstream Karpenter, with Go's mime/multipart) must read it to merge
// its own bootstrap part: a header block ended by a blank line, with a
// MIME-Version header and a multipart Content-Type carrying a boundary; at
// least one part, each part's headers ended by a blank line; and a closing
// "--boundary--" line, or a last "--boundary" line followed by nothing,
// which Go's mime/multipart also reads as the end. Lines may end in LF or
// CRLF.
//
// Every part is decoded (7bit, 8bit, binary, base64, quoted-printable),
// gzip parts are decompressed (at most MaxDecodedBytes), and multipart and
// message/rfc822 parts are parsed recursively (at most MaxMIMEDepth
// levels), so that
// MIMEPart.Body of every leaf is the text the node runs. On failure it
// returns a *ParseError naming the line; a part that cannot be decoded or
// read as text has Uninspectable set.
func ParseMIME(text string) (*MIMEDocument, error) {
	return parseMIME(text, true)
}

// mimeScope says where a (possibly nested) multipart body sits in
// spec.userData, for line numbers and part paths in errors.
type mimeScope struct {
	depth int
	// path is the enclosing part's path ("" at the top level).
	path string
	// offset is added to a 0-based line index to get a userData line,
	// unless encoded is set, when every line maps to line.
	offset  int
	encoded bool
	line    int
	// strict requires a closing delimiter (the top level of AL2/AL2023).
	strict bool
	// decoded counts the bytes gzip parts decompressed to so far, over
	// the whole document (shared by nested scopes).
	decoded *int
	// parts counts the parts read so far, over the whole document
	// (shared by nested scopes); at most MaxMIMEParts.
	parts *int
	// gzipLayers counts the gzip-compressed MIME documents this scope
	// is nested in; at most MaxGzipLayers.
	gzipLayers int
}

func (sc mimeScope) lineOf(i int) int {
	if sc.encoded {
		return sc.line
	}
	return sc.offset + i + 1
}

func (sc mimeScope) partPath(n int) string {
	if sc.path == "" {
		return strconv.Itoa(n)
	}
	return sc.path + "." + strconv.Itoa(n)
}

// parseMIME parses; strict=false accepts a missing closing delimiter (what
// cloud-init, which reads a Custom family's userData unmerged, tolerates).
func parseMIME(text string, strict bool) (*MIMEDocument, error) {
	return parseMIMEIn(text, mimeScope{depth: 1, strict: strict, decoded: new(int), parts: new(int)})
}

func parseMIMEIn(text string, sc mimeScope) (*MIMEDocument, error) {
	lines := splitLines(text)
	perr := func(line int, format string, args ...any) error {
		return &ParseError{Format: "MIME", Line: sc.lineOf(line - 1), Msg: fmt.Sprintf(format, args...)}
	}
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i == len(lines) {
		return nil, &ParseError{Format: "MIME", Line: 0, Msg: "empty document"}
	}
	header, next, err := readHeader(lines, i, 0)
	if err != nil {
		return nil, shiftMIMEError(err, sc)
	}
	i = next
	if sc.strict && header.Get("MIME-Version") == "" {
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
	if err := checkBoundary(boundary); err != nil {
		return nil, perr(ctLine, "%s", err)
	}
	doc := &MIMEDocument{Header: header, MediaType: mt, Boundary: boundary}
	doc.Parts, doc.Closed, err = parseParts(lines, i, boundary, ctLine, sc)
	if err != nil {
		return nil, err
	}
	return doc, nil
}

func checkBoundary(boundary string) error {
	if boundary == "" {
		return fmt.Errorf("Content-Type has no boundary parameter; add boundary=\"BOUNDARY\"")
	}
	if len(boundary) > maxBoundaryLength {
		return fmt.Errorf("boundary is %d characters; RFC 2046 allows at most %d", len(boundary), maxBoundaryLength)
	}
	return nil
}

// shiftMIMEError maps a line inside a nested body to a userData line.
func shiftMIMEError(err error, sc mimeScope) error {
	var pe *ParseError
	if errors.As(err, &pe) && pe.Line > 0 {
		out := *pe
		out.Line = sc.lineOf(pe.Line - 1)
		return &out
	}
	return err
}

// parseParts reads the parts of a multipart body from lines[i:] (the
// preamble first), up to the closing delimiter. ctLine is the 1-based
// line (within lines) of the Content-Type that declared boundary. It also
// reports whether the closing delimiter was found.
func parseParts(lines []string, i int, boundary string, ctLine int, sc mimeScope) ([]MIMEPart, bool, error) {
	perr := func(line int, format string, args ...any) error {
		return &ParseError{Format: "MIME", Line: sc.lineOf(line - 1), Msg: fmt.Sprintf(format, args...)}
	}
	var parts []MIMEPart
	delim, closeDelim := "--"+boundary, "--"+boundary+"--"
	isDelim := func(l string) (isDelim, isClose bool) {
		l = strings.TrimRight(l, " \t")
		return l == delim, l == closeDelim
	}
	i, err := skipPreamble(lines, i, isDelim, perr)
	if err != nil {
		return nil, false, err
	}
	if i == len(lines) {
		return nil, false, perr(ctLine, "boundary %q never appears; each part must start with a line %q", boundary, delim)
	}
	for i < len(lines) {
		// lines[i] is a delimiter line.
		if allBlank(lines[i+1:]) {
			// A delimiter followed only by blank lines ends the document:
			// Go's mime/multipart (which Karpenter uses to merge) reads it
			// as the end of the last part, so it is accepted as written.
			if len(parts) == 0 {
				return nil, false, perr(i+1, "no part after delimiter %q", delim)
			}
			return parts, false, nil
		}
		if *sc.parts++; *sc.parts > MaxMIMEParts {
			return nil, false, &ParseError{Format: "MIME", Line: sc.lineOf(i), Msg: fmt.Sprintf("has more than %d parts in total; karpx reads at most that many (a bootstrap needs a handful)", MaxMIMEParts), Uninspectable: true}
		}
		part, next, delimited, closed, err := readPart(lines, i, len(parts)+1, isDelim, sc)
		if err != nil {
			return nil, false, err
		}
		parts = append(parts, part)
		if !delimited {
			if sc.strict {
				return nil, false, perr(len(lines), "no closing delimiter %q after part %d; the autoscaler cannot merge an unterminated MIME document", closeDelim, len(parts))
			}
			return parts, false, nil
		}
		if closed {
			return parts, true, nil // the rest is the epilogue, which is ignored
		}
		i = next
	}
	return parts, false, nil
}

// skipPreamble returns the index of the first delimiter line at or after
// lines[i] (len(lines) when there is none); a closing delimiter before it
// is an error made by perr.
func skipPreamble(lines []string, i int, isDelim func(string) (bool, bool), perr func(int, string, ...any) error) (int, error) {
	for i < len(lines) {
		d, c := isDelim(lines[i])
		if c {
			// The trimmed line is the closing delimiter.
			return i, perr(i+1, "closing delimiter %q before any part", strings.TrimRight(lines[i], " \t"))
		}
		if d {
			break
		}
		i++
	}
	return i, nil
}

// readPart reads part n, whose delimiter line is lines[delimLine]: its
// header, its body up to the next delimiter, decoded (decodePart). It
// returns the part, the index of that next delimiter line, whether there
// was one and whether it was the closing one.
func readPart(lines []string, delimLine, n int, isDelim func(string) (bool, bool), sc mimeScope) (part MIMEPart, next int, delimited, closed bool, err error) {
	partLine := delimLine + 1
	i := delimLine + 1
	ph, bodyStart, err := readPartHeader(lines, i, n, isDelim)
	if err != nil {
		return part, 0, false, false, shiftMIMEError(err, sc)
	}
	j := bodyStart
	for j < len(lines) {
		d, c := isDelim(lines[j])
		if d || c {
			delimited, closed = true, c
			break
		}
		j++
	}
	headerEnd := bodyStart - 1 // the blank line
	if headerEnd < i {
		headerEnd = i
	}
	part = MIMEPart{
		Header: ph, Path: sc.partPath(n), HeaderLine: sc.lineOf(partLine - 1), BodyLine: sc.lineOf(bodyStart),
		MediaType: "text/plain", Encoded: sc.encoded,
		RawHeader: strings.Join(lines[i:headerEnd], "\n"),
		RawBody:   strings.Join(lines[bodyStart:j], "\n"),
	}
	if err := decodePart(&part, lines, partLine, bodyStart, sc); err != nil {
		return part, 0, false, false, err
	}
	return part, j, delimited, closed, nil
}
