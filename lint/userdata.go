package lint

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// MaxUserDataBytes is EC2's userData limit: 16 KB (16,384 bytes) of raw
// data before base64 encoding (Amazon EC2 User Guide, "Run commands when you
// launch an EC2 instance with user data input").
const MaxUserDataBytes = 16 * 1024

// Format is the form userData was recognised in.
type Format string

// Formats recognised by ParseUserData.
const (
	FormatMIME       Format = "MIME multipart"
	FormatShell      Format = "shell script"
	FormatNodeConfig Format = "NodeConfig YAML"
	FormatTOML       Format = "Bottlerocket TOML"
	FormatPowerShell Format = "PowerShell"
	FormatOpaque     Format = "opaque"
)

// UserData is parsed userData.
type UserData struct {
	// Family is the AMI family it was parsed for (apisv1.AMIFamily*, or ""
	// when unknown).
	Family string
	// Format is the form it was recognised in.
	Format Format
	// MIME is set when Format is FormatMIME.
	MIME *MIMEDocument
	// NodeConfigs holds the NodeConfig documents, from a bare document or
	// from application/node.eks.aws MIME parts (AL2023 only).
	NodeConfigs []NodeConfigDocument
	// Bottlerocket is set when Format is FormatTOML.
	Bottlerocket *BottlerocketSettings
	// PowerShell is set when Format is FormatPowerShell.
	PowerShell *PowerShellScript

	segments []segment
	// nodeConfigOffsets[i] is added to NodeConfigs[i] node lines to get
	// userData lines.
	nodeConfigOffsets []int
}

// ParseUserData parses text in the form the autoscaler (and upstream
// Karpenter) accepts for family:
//
//   - AL2: MIME multipart, or a plain shell script.
//   - AL2023: MIME multipart (shell, cloud-config and application/node.eks.aws
//     parts, the last parsed as NodeConfig), a bare NodeConfig YAML document,
//     or a plain shell script.
//   - Bottlerocket: TOML.
//   - Windows2019/2022/2025: PowerShell, with or without <powershell> tags.
//   - Custom or unknown (""): passed to the instance unmerged, so any text is
//     accepted; a MIME document is read leniently only to find its scripts.
//
// Text is MIME when its first non-blank line is a MIME-Version header or a
// multipart Content-Type header, and (AL2023) a NodeConfig when a line at
// column 0 starts with "apiVersion:" or "kind:" and the text has no "#!"
// first line. Errors are *ParseError.
func ParseUserData(family, text string) (*UserData, error) {
	ud := &UserData{Family: family}
	switch {
	case family == apisv1.AMIFamilyAL2 || family == apisv1.AMIFamilyAL2023:
		switch {
		case looksLikeMIME(text):
			doc, err := ParseMIME(text)
			if err != nil {
				return nil, err
			}
			ud.Format, ud.MIME = FormatMIME, doc
			for _, p := range doc.Leaves() {
				seg := segmentOf(p)
				if seg.kind == segNodeConfig {
					if family != apisv1.AMIFamilyAL2023 {
						seg.kind = segOpaque // AL2 has no nodeadm; the part is ignored
					} else {
						docs, err := ParseNodeConfig(p.Body)
						if err != nil {
							return nil, shiftParseError(err, p)
						}
						for range docs {
							ud.nodeConfigOffsets = append(ud.nodeConfigOffsets, p.BodyLine-1)
						}
						ud.NodeConfigs = append(ud.NodeConfigs, docs...)
					}
				}
				ud.segments = append(ud.segments, seg)
			}
		case family == apisv1.AMIFamilyAL2023 && looksLikeNodeConfig(text):
			docs, err := ParseNodeConfig(text)
			if err != nil {
				return nil, err
			}
			ud.Format, ud.NodeConfigs = FormatNodeConfig, docs
			for range docs {
				ud.nodeConfigOffsets = append(ud.nodeConfigOffsets, 0)
			}
			ud.segments = []segment{{kind: segNodeConfig, text: text, line: 1}}
		default:
			ud.Format = FormatShell
			ud.segments = []segment{{kind: segShell, text: text, line: 1}}
		}
	case family == apisv1.AMIFamilyBottlerocket:
		s, err := ParseBottlerocketTOML(text)
		if err != nil {
			return nil, err
		}
		ud.Format, ud.Bottlerocket = FormatTOML, s
		ud.segments = []segment{{kind: segTOML, text: text, line: 1}}
	case strings.HasPrefix(family, "Windows"):
		ps, err := ParsePowerShell(text)
		if err != nil {
			return nil, err
		}
		ud.Format, ud.PowerShell = FormatPowerShell, ps
		ud.segments = []segment{{kind: segPowerShell, text: text, line: 1}}
	default: // Custom or unknown: passed to the node verbatim.
		if looksLikeMIME(text) {
			// cloud-init's MIME reader is lenient, so a document karpx
			// cannot walk may still run parts on the node.
			doc, err := parseMIME(text, false)
			if err != nil {
				return nil, asUninspectable(err, "the MIME document")
			}
			ud.Format, ud.MIME = FormatMIME, doc
			for _, p := range doc.Leaves() {
				ud.segments = append(ud.segments, segmentOf(p))
			}
			break
		}
		ud.Format = FormatOpaque
		kind := guessKind(text)
		if kind == segShell {
			ud.Format = FormatShell
		}
		ud.segments = []segment{{kind: kind, text: text, line: 1}}
	}
	return ud, nil
}

// shiftParseError maps a NodeConfig error inside a MIME part to userData lines.
func shiftParseError(err error, p MIMEPart) error {
	return editParseError(err, func(out *ParseError) {
		out.Msg = fmt.Sprintf("MIME part %s (application/node.eks.aws): %s", p.Path, out.Msg)
		if p.Encoded || out.Line == 0 {
			out.Line = p.BodyLine
		} else {
			out.Line += p.BodyLine - 1
		}
	})
}

// segmentOf is the segment of a leaf MIME part.
func segmentOf(p MIMEPart) segment {
	return segment{kind: segmentKindOf(p.MediaType, p.Body), text: p.Body, line: p.BodyLine, encoded: p.Encoded, part: p.Path}
}

// segmentKindOf maps a MIME part media type to how it is run. A part
// typed text/plain, application/octet-stream or x-not-multipart (also a
// decompressed gzip part) is run by what its content starts with, as
// cloud-init decides it (cloud-init documentation, "User data formats").
func segmentKindOf(mediaType, body string) segmentKind {
	switch strings.ToLower(mediaType) {
	case "text/plain", "application/octet-stream", "text/x-not-multipart":
		return guessKind(body)
	case "text/x-shellscript", "text/x-sh", "text/cloud-boothook", "text/x-shellscript-per-boot",
		"text/x-shellscript-per-instance", "text/x-shellscript-per-once":
		return segShell
	case "text/cloud-config":
		return segCloudConfig
	case "text/jinja2":
		return segJinja
	case "text/cloud-config-archive":
		return segCloudConfigArchive
	case "text/x-include-url", "text/x-include-once-url":
		return segInclude
	case "text/part-handler":
		return segPartHandler
	case "application/node.eks.aws":
		return segNodeConfig
	case "text/x-powershell":
		return segPowerShell
	default:
		return segOpaque
	}
}

// guessKind reads text by its first line as cloud-init does (cloud-init
// documentation, "User data formats"): "#!" and "#cloud-boothook" are
// shell, "#cloud-config" is cloud-config, "## template: jinja" a Jinja
// template cloud-init renders first (jinja.go), "#cloud-config-archive" an archive, "#include" and
// "#include-once" URL lists, "#part-handler" a Python handler,
// "<powershell>" PowerShell; anything else is opaque.
func guessKind(text string) segmentKind {
	t := strings.ToLower(strings.TrimLeft(text, " \t\r\n"))
	switch {
	case strings.HasPrefix(t, "#!"), strings.HasPrefix(t, "#cloud-boothook"):
		return segShell
	case strings.HasPrefix(t, "#cloud-config-archive"):
		return segCloudConfigArchive
	case strings.HasPrefix(t, "#cloud-config"):
		return segCloudConfig
	case strings.HasPrefix(t, "## template: jinja"):
		return segJinja
	case strings.HasPrefix(t, "#include"):
		return segInclude
	case strings.HasPrefix(t, "#part-handler"):
		return segPartHandler
	case strings.HasPrefix(t, "<powershell>"):
		return segPowerShell
	}
	return segOpaque
}

// looksLikeNodeConfig reports whether text reads as a YAML document with
// apiVersion or kind at column 0 rather than a script.
func looksLikeNodeConfig(text string) bool {
	if strings.HasPrefix(strings.TrimSpace(text), "#!") {
		return false
	}
	for _, l := range eachLine(text) {
		if strings.HasPrefix(l, "apiVersion:") || strings.HasPrefix(l, "kind:") {
			return true
		}
	}
	return false
}

// base64UserData reports whether the whole of text is base64 (lines of the
// base64 alphabet only, as `base64` wraps them) that decodes to text or to
// gzip data, and returns the decoded text (gunzipped when compressed, at
// most MaxGzipLayers layers and MaxDecodedBytes bytes). note is set when
// the decoded content cannot be read (corrupt gzip, too many layers, too
// large, binary): the text is still base64 userData, but what it hides is
// not inspected.
func base64UserData(text string) (dec string, ok bool, note string) {
	t := strings.TrimSpace(text)
	if len(t) < 8 {
		return "", false, ""
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' || c == '\n' || c == '\r') {
			return "", false, ""
		}
	}
	raw, err := base64.StdEncoding.DecodeString(stripSpace(t))
	if err != nil {
		return "", false, ""
	}
	out := string(raw)
	if !strings.HasPrefix(out, "\x1f\x8b") {
		if !utf8.ValidString(out) || strings.IndexByte(out, 0) >= 0 {
			return "", false, ""
		}
		return out, true, ""
	}
	// gzip data, possibly gzip within gzip: base64 userData either way.
	decoded := 0
	for layer := 1; strings.HasPrefix(out, "\x1f\x8b"); layer++ {
		if layer > MaxGzipLayers {
			return "", true, fmt.Sprintf("its content is gzip-compressed more than %d times", MaxGzipLayers)
		}
		if out, err = gunzip(out, &decoded); err != nil {
			return "", true, "its gzip content does not decompress: " + err.Error()
		}
	}
	if !utf8.ValidString(out) || strings.IndexByte(out, 0) >= 0 {
		return "", true, "its decompressed content is binary"
	}
	return out, true, ""
}

// CheckUserData runs every userData rule (KX001–KX010) on text for the given
// AMI family and returns the findings, with Field "spec.userData" and Kind
// and Name left empty for the caller to fill.
func CheckUserData(family, text string) Findings {
	return resolveSwap(family, text, dedupeSecrets(checkUserData(family, text, true)))
}

// checkUserData is CheckUserData; unwrap allows one level of base64
// unwrapping (KX010), so that base64 nested in base64 costs no more.
//
// Text over MaxUserDataBytes gets the KX001 denial alone: EC2 refuses to
// launch with it, so none of it can run on a node, and no parser reads it
// (a parser's cost grows with its input; 2 MB of nested "((" took the
// webhook to a fatal stack overflow). The same holds for base64-decoded
// userData: KX010 denies it, and its decoded content is inspected only up
// to the same size.
//
// Longer than 80 lines on purpose: it is the dispatch over userData's
// forms (size, base64, gzip, MIME multipart, then each AMI family's
// format), read top to bottom in the order a node would decode them; each
// form's checks live in their own functions.
func checkUserData(family, text string, unwrap bool) Findings {
	if text == "" {
		return nil
	}
	if n := len(text); n > MaxUserDataBytes {
		return Findings{userDataFinding(RuleUserDataSize, 0,
			fmt.Sprintf("is %d bytes; EC2 accepts at most %d bytes (16 KB) before base64, and the autoscaler adds its bootstrap to it; karpx did not inspect it further", n, MaxUserDataBytes),
			"move large files to S3 or SSM and fetch them at boot with the node role")}
	}
	var out Findings
	if dec, ok, note := base64UserData(text); ok && unwrap {
		msg := "is base64-encoded; Karpenter and karpx base64-encode userData themselves, so the node would receive the encoded text"
		switch {
		case note != "":
			msg += " (" + note + "; not inspected)"
		case len(dec) > MaxUserDataBytes:
			msg += fmt.Sprintf(" (it decodes to %d bytes, more than EC2's %d; not inspected)", len(dec), MaxUserDataBytes)
		}
		out = append(out, userDataFinding(RuleUserDataBase64, 1, msg, "put the decoded text in spec.userData"))
		if note != "" || len(dec) > MaxUserDataBytes {
			return out
		}
		// Inspect what it hides as well, so that a secret is named.
		for _, f := range checkUserData(family, dec, false) {
			f.Line, f.Message = 1, f.Message+" (in the base64-decoded userData)"
			out = append(out, f)
		}
		return out
	}
	ud, err := ParseUserData(family, text)
	if err != nil {
		var pe *ParseError
		line, msg := 0, err.Error()
		if errors.As(err, &pe) {
			line, msg = pe.Line, pe.Format+": "+pe.Msg
		}
		if pe != nil && pe.Uninspectable {
			fix := "send every part as text (7bit, base64 or quoted-printable, optionally gzip) in a MIME tree at most 8 levels deep"
			if pe.Format != "MIME" {
				fix = "simplify it to the nesting a bootstrap needs; karpx refuses what it cannot inspect within its bounds (docs/rules.md, KX009)"
			}
			out = append(out, userDataFinding(RuleUserDataUninspectable, line,
				"has a part karpx cannot decode or read: "+msg, fix))
		} else {
			out = append(out, userDataFinding(RuleUserDataParse, line,
				fmt.Sprintf("does not parse as %s userData: %s", familyLabel(family), msg),
				formatHint(family)))
		}
		// Still look for unsafe content in the raw text, read as a script.
		kind := segShell
		if strings.HasPrefix(family, "Windows") {
			kind = segPowerShell
		}
		raw := segment{kind: kind, text: text, line: 1}
		out = append(out, scanSecrets(raw)...)
		switch {
		case kind == segPowerShell:
			out = append(out, scanScript(raw)...)
		case family != apisv1.AMIFamilyBottlerocket:
			out = append(out, scanShellLenient(raw)...)
		}
		return out
	}
	// Secrets: the raw text covers every unencoded form; decoded parts are
	// scanned on their own.
	out = append(out, scanSecrets(segment{kind: segOpaque, text: text, line: 1})...)
	for _, s := range ud.segments {
		if s.encoded {
			out = append(out, scanSecrets(s)...)
		}
		out = append(out, scanSegment(s, 0)...)
	}
	if ud.Bottlerocket != nil {
		out = append(out, ud.Bottlerocket.containerFindings()...)
		out = append(out, ud.Bottlerocket.bootstrapCommandFindings()...)
	}
	out = dedupe(out)
	if family != apisv1.AMIFamilyCustom && family != "" {
		for i, d := range ud.NodeConfigs {
			out = append(out, nodeConfigOwnedFindings([]NodeConfigDocument{d}, ud.nodeConfigOffsets[i])...)
			out = append(out, nodeConfigJoinFindings([]NodeConfigDocument{d}, ud.nodeConfigOffsets[i])...)
		}
		if ud.Bottlerocket != nil {
			out = append(out, ud.Bottlerocket.ownedFindings()...)
		}
	}
	return out
}

func familyLabel(family string) string {
	if family == "" {
		return "unknown-family"
	}
	return family
}

// formatHint is the fix for a KX002 finding.
func formatHint(family string) string {
	switch {
	case family == apisv1.AMIFamilyAL2:
		return "use a shell script or MIME multipart with a boundary, a blank line after each header block and a closing --BOUNDARY--"
	case family == apisv1.AMIFamilyAL2023:
		return "use a shell script, a NodeConfig (apiVersion: node.eks.aws/v1alpha1) or MIME multipart with a closing --BOUNDARY--"
	case family == apisv1.AMIFamilyBottlerocket:
		return "write Bottlerocket settings as TOML, for example [settings.kubernetes] on its own line"
	case strings.HasPrefix(family, "Windows"):
		return "write PowerShell, optionally wrapped in one <powershell>…</powershell> pair"
	}
	return "fix the syntax"
}

// CheckEC2NodeClass runs the EC2NodeClass rules on nc. It never returns an
// error: everything wrong is a Finding. A nil nc has no findings.
func CheckEC2NodeClass(nc *apisv1.EC2NodeClass) Findings {
	if nc == nil || nc.Spec.UserData == nil {
		return nil
	}
	out := CheckUserData(nc.AMIFamilyName(), *nc.Spec.UserData)
	for i := range out {
		out[i].Kind, out[i].Name = "EC2NodeClass", nc.Name
	}
	return out
}

// dedupe keeps one finding per rule and line: the last, which is the more
// specific (a private key named as users[0].ssh_authorized_keys[1] rather
// than found in the raw text).
func dedupe(fs Findings) Findings {
	type key struct {
		rule string
		line int
	}
	at := make(map[key]int, len(fs))
	out := fs[:0]
	for _, f := range fs {
		k := key{f.RuleID, f.Line}
		if i, ok := at[k]; ok {
			out[i] = f
			continue
		}
		at[k] = len(out)
		out = append(out, f)
	}
	return out
}
