package lint

import (
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"strings"
	"unicode/utf8"
)

// decodePart undoes p's Content-Transfer-Encoding and gzip compression,
// and parses nested multiparts. partLine and bodyStart index lines.
func decodePart(p *MIMEPart, lines []string, partLine, bodyStart int, sc mimeScope) error {
	params, err := parseContentType(p, lines, partLine, bodyStart, sc)
	if err != nil {
		return err
	}
	body, err := transferDecode(p, lines, partLine, bodyStart, sc)
	if err != nil {
		return err
	}
	if gzipTypes[p.MediaType] || strings.HasPrefix(body, "\x1f\x8b") {
		dec, err := gunzip(body, sc.decoded)
		if err != nil {
			return opaque(p, "is gzip-compressed but does not decompress: %v", err)
		}
		body, p.Encoded, p.Compressed = dec, true, true
		p.MediaType, params = "text/plain", nil
		if looksLikeMIME(body) {
			return decodeCompressedMIME(p, body, sc)
		}
	}
	p.Body = body
	switch {
	case p.MediaType == "message/rfc822":
		return decodeMessage(p, body, bodyStart, sc)
	case strings.HasPrefix(p.MediaType, "multipart/"):
		return decodeMultipart(p, body, params["boundary"], bodyStart, sc)
	case !utf8.ValidString(body) || strings.IndexByte(body, 0) >= 0:
		return opaque(p, "(%s) is binary after decoding; only text parts can be inspected", p.MediaType)
	}
	return nil
}

// opaque is the error of a part karpx cannot read: Uninspectable, at its
// body's line.
func opaque(p *MIMEPart, format string, args ...any) error {
	return &ParseError{Format: "MIME", Line: p.BodyLine, Msg: "part " + p.Path + " " + fmt.Sprintf(format, args...), Uninspectable: true}
}

// parseContentType sets p.MediaType from its Content-Type header, if any,
// and returns the header's parameters; an error names the header's line.
func parseContentType(p *MIMEPart, lines []string, partLine, bodyStart int, sc mimeScope) (map[string]string, error) {
	pct := p.Header.Get("Content-Type")
	if pct == "" {
		return nil, nil
	}
	pmt, params, err := mime.ParseMediaType(pct)
	if err != nil {
		return nil, &ParseError{Format: "MIME", Line: sc.lineOf(headerLine(lines, partLine, bodyStart, "content-type") - 1),
			Msg: fmt.Sprintf("part %s Content-Type %q does not parse: %v", p.Path, pct, err), Uninspectable: sc.depth > 1}
	}
	p.MediaType = pmt
	return params, nil
}

// transferDecode returns p's raw body with its Content-Transfer-Encoding
// undone (p.Encoded set when there was one); an unknown encoding is an
// error naming its header's line.
func transferDecode(p *MIMEPart, lines []string, partLine, bodyStart int, sc mimeScope) (string, error) {
	body := p.RawBody
	switch enc := strings.ToLower(strings.TrimSpace(p.Header.Get("Content-Transfer-Encoding"))); enc {
	case "", "7bit", "8bit", "binary":
		return body, nil
	case "base64":
		dec, err := base64.StdEncoding.DecodeString(stripSpace(body))
		if err != nil {
			return "", opaque(p, "is marked base64 but its body does not decode (%v); a part karpx cannot read could hide anything", err)
		}
		p.Encoded = true
		return string(dec), nil
	case "quoted-printable":
		dec, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
		if err != nil {
			return "", opaque(p, "is marked quoted-printable but its body does not decode (%v)", err)
		}
		p.Encoded = true
		return string(dec), nil
	default:
		return "", &ParseError{Format: "MIME", Line: sc.lineOf(headerLine(lines, partLine, bodyStart, "content-transfer-encoding") - 1),
			Msg: fmt.Sprintf("part %s has unknown Content-Transfer-Encoding %q; use 7bit, base64 or quoted-printable", p.Path, enc), Uninspectable: true}
	}
}

// decodeCompressedMIME reads body, a decompressed MIME document (cloud-init
// reads decompressed content as it reads userData), as p's own header
// block and body, at p's level.
func decodeCompressedMIME(p *MIMEPart, body string, sc mimeScope) error {
	p.Body = body
	if sc.gzipLayers+1 > MaxGzipLayers {
		return opaque(p, "nests gzip-compressed MIME documents more than %d deep", MaxGzipLayers)
	}
	child, err := encapsulated(body, 0, p.Path, mimeScope{depth: sc.depth, encoded: true, line: p.BodyLine, decoded: sc.decoded, parts: sc.parts, gzipLayers: sc.gzipLayers + 1})
	if err != nil {
		return asUninspectable(err, "part "+p.Path+" (gzip-compressed MIME)")
	}
	p.MediaType, p.Parts = child.MediaType, child.Parts
	if p.Parts == nil {
		p.Parts = []MIMEPart{child}
	}
	return nil
}

// decodeMessage reads body, a message/rfc822 part's content, as one nested
// part with its own header: cloud-init (Python's email walk) runs the parts
// inside it.
func decodeMessage(p *MIMEPart, body string, bodyStart int, sc mimeScope) error {
	if sc.depth+1 > MaxMIMEDepth {
		return opaque(p, "nests messages more than %d levels deep", MaxMIMEDepth)
	}
	child, err := encapsulated(body, bodyStart, p.Path, mimeScope{depth: sc.depth + 1, path: p.Path, encoded: p.Encoded, line: p.BodyLine, offset: sc.offset, decoded: sc.decoded, parts: sc.parts, gzipLayers: sc.gzipLayers})
	if err != nil {
		return asUninspectable(err, "part "+p.Path+" (message/rfc822)")
	}
	p.Parts = []MIMEPart{child}
	return nil
}

// decodeMultipart parses body, a multipart part's content split on
// boundary, into p.Parts one level deeper.
func decodeMultipart(p *MIMEPart, body, boundary string, bodyStart int, sc mimeScope) error {
	if sc.depth+1 > MaxMIMEDepth {
		return opaque(p, "nests multiparts more than %d levels deep", MaxMIMEDepth)
	}
	if err := checkBoundary(boundary); err != nil {
		return opaque(p, "is %s but %v", p.MediaType, err)
	}
	inner := mimeScope{depth: sc.depth + 1, path: p.Path, encoded: p.Encoded, line: p.BodyLine, offset: sc.offset + bodyStart, decoded: sc.decoded, parts: sc.parts, gzipLayers: sc.gzipLayers}
	if sc.encoded {
		inner.encoded = true
	}
	ps, _, err := parseParts(splitLines(body), 0, boundary, 1, inner)
	if err != nil {
		return asUninspectable(err, "part "+p.Path)
	}
	p.Parts = ps
	return nil
}

// encapsulated reads body, a header block and a body (a message/rfc822
// part's content, or a decompressed MIME document), as one part at scope
// sc: the part's path is path+".1", and bodyStart is the index of body's
// first line in the enclosing lines (for line numbers when not encoded).
func encapsulated(body string, bodyStart int, path string, sc mimeScope) (MIMEPart, error) {
	sc.path = path
	sc.offset += bodyStart
	lines := splitLines(body)
	h, next, err := readHeader(lines, 0, 1)
	if err != nil {
		return MIMEPart{}, shiftMIMEError(err, sc)
	}
	child := MIMEPart{
		Header: h, Path: sc.partPath(1), HeaderLine: sc.lineOf(0), BodyLine: sc.lineOf(next),
		MediaType: "text/plain", Encoded: sc.encoded,
		RawHeader: strings.Join(lines[:max(next-1, 0)], "\n"),
		RawBody:   strings.Join(lines[next:], "\n"),
	}
	if err := decodePart(&child, lines, 1, next, sc); err != nil {
		return MIMEPart{}, err
	}
	return child, nil
}

// asUninspectable marks an error inside a nested body as Uninspectable: the
// enclosing document is well-formed, so the node would still receive it.
func asUninspectable(err error, where string) error {
	return editParseError(err, func(out *ParseError) {
		if !strings.HasPrefix(out.Msg, "part ") {
			out.Msg = where + ": " + out.Msg
		}
		out.Uninspectable = true
	})
}

// editParseError returns a copy of the *ParseError in err's chain changed
// by edit, or err itself when it holds no *ParseError. err is not changed.
func editParseError(err error, edit func(*ParseError)) error {
	var pe *ParseError
	if !errors.As(err, &pe) {
		return err
	}
	out := *pe
	edit(&out)
	return &out
}

// gunzip decompresses s, failing when *decoded (what earlier parts of the
// same document decompressed to) would pass MaxDecodedBytes; it adds what
// it decompressed to *decoded.
func gunzip(s string, decoded *int) (string, error) {
	zr, err := gzip.NewReader(strings.NewReader(s))
	if err != nil {
		return "", err
	}
	left := MaxDecodedBytes - *decoded
	out, err := io.ReadAll(io.LimitReader(zr, int64(left)+1))
	if err != nil {
		return "", err
	}
	if len(out) > left {
		return "", fmt.Errorf("more than %d bytes (1 MiB) decompressed in total", MaxDecodedBytes)
	}
	*decoded += len(out)
	return string(out), nil
}
