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
	where := "part " + p.Path
	opaque := func(format string, args ...any) error {
		return &ParseError{Format: "MIME", Line: p.BodyLine, Msg: where + " " + fmt.Sprintf(format, args...), Uninspectable: true}
	}
	var params map[string]string
	if pct := p.Header.Get("Content-Type"); pct != "" {
		pmt, pp, err := mime.ParseMediaType(pct)
		if err != nil {
			return &ParseError{Format: "MIME", Line: sc.lineOf(headerLine(lines, partLine, bodyStart, "content-type") - 1),
				Msg: fmt.Sprintf("%s Content-Type %q does not parse: %v", where, pct, err), Uninspectable: sc.depth > 1}
		}
		p.MediaType, params = pmt, pp
	}
	body := p.RawBody
	switch enc := strings.ToLower(strings.TrimSpace(p.Header.Get("Content-Transfer-Encoding"))); enc {
	case "", "7bit", "8bit", "binary":
	case "base64":
		dec, err := base64.StdEncoding.DecodeString(stripSpace(body))
		if err != nil {
			return opaque("is marked base64 but its body does not decode (%v); a part karpx cannot read could hide anything", err)
		}
		body, p.Encoded = string(dec), true
	case "quoted-printable":
		dec, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
		if err != nil {
			return opaque("is marked quoted-printable but its body does not decode (%v)", err)
		}
		body, p.Encoded = string(dec), true
	default:
		return &ParseError{Format: "MIME", Line: sc.lineOf(headerLine(lines, partLine, bodyStart, "content-transfer-encoding") - 1),
			Msg: fmt.Sprintf("%s has unknown Content-Transfer-Encoding %q; use 7bit, base64 or quoted-printable", where, enc), Uninspectable: true}
	}
	if gzipTypes[p.MediaType] || strings.HasPrefix(body, "\x1f\x8b") {
		dec, err := gunzip(body, sc.decoded)
		if err != nil {
			return opaque("is gzip-compressed but does not decompress: %v", err)
		}
		body, p.Encoded, p.Compressed = dec, true, true
		p.MediaType, params = "text/plain", nil
		if looksLikeMIME(body) {
			// A compressed MIME document (cloud-init reads decompressed
			// content as it reads userData): its header block and body
			// are read as the part's own, at the part's level.
			p.Body = body
			child, err := encapsulated(body, 0, p.Path, mimeScope{depth: sc.depth, encoded: true, line: p.BodyLine, decoded: sc.decoded})
			if err != nil {
				return asUninspectable(err, where+" (gzip-compressed MIME)")
			}
			p.MediaType, p.Parts = child.MediaType, child.Parts
			if p.Parts == nil {
				p.Parts = []MIMEPart{child}
			}
			return nil
		}
	}
	p.Body = body
	if p.MediaType == "message/rfc822" {
		// An encapsulated message: cloud-init (Python's email walk) runs
		// the parts inside it, so it is read as one nested part with its
		// own header.
		if sc.depth+1 > MaxMIMEDepth {
			return opaque("nests messages more than %d levels deep", MaxMIMEDepth)
		}
		child, err := encapsulated(body, bodyStart, p.Path, mimeScope{depth: sc.depth + 1, path: p.Path, encoded: p.Encoded, line: p.BodyLine, offset: sc.offset, decoded: sc.decoded})
		if err != nil {
			return asUninspectable(err, where+" (message/rfc822)")
		}
		p.Parts = []MIMEPart{child}
		return nil
	}
	if strings.HasPrefix(p.MediaType, "multipart/") {
		if sc.depth+1 > MaxMIMEDepth {
			return opaque("nests multiparts more than %d levels deep", MaxMIMEDepth)
		}
		if err := checkBoundary(params["boundary"]); err != nil {
			return opaque("is %s but %v", p.MediaType, err)
		}
		inner := mimeScope{depth: sc.depth + 1, path: p.Path, encoded: p.Encoded, line: p.BodyLine, offset: sc.offset + bodyStart, decoded: sc.decoded}
		if sc.encoded {
			inner.encoded = true
		}
		ps, _, err := parseParts(splitLines(body), 0, params["boundary"], 1, inner)
		if err != nil {
			return asUninspectable(err, where)
		}
		p.Parts = ps
		return nil
	}
	if !utf8.ValidString(body) || strings.IndexByte(body, 0) >= 0 {
		return opaque("(%s) is binary after decoding; only text parts can be inspected", p.MediaType)
	}
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
	var pe *ParseError
	if !errors.As(err, &pe) {
		return err
	}
	out := *pe
	if !strings.HasPrefix(out.Msg, "part ") {
		out.Msg = where + ": " + out.Msg
	}
	out.Uninspectable = true
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
