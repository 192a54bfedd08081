package lint

import (
	"errors"
	"fmt"
	"strings"

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
			for i, p := range doc.Parts {
				seg := segment{kind: segmentKindOf(p.MediaType), text: p.Body, line: p.BodyLine, encoded: p.Encoded, part: i + 1}
				if seg.kind == segNodeConfig {
					if family != apisv1.AMIFamilyAL2023 {
						seg.kind = segOpaque // AL2 has no nodeadm; the part is ignored
					} else {
						docs, err := ParseNodeConfig(p.Body)
						if err != nil {
							return nil, shiftParseError(err, p, i+1)
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
	default: // Custom or unknown: never a parse error.
		if looksLikeMIME(text) {
			if doc, err := parseMIME(text, false); err == nil {
				ud.Format, ud.MIME = FormatMIME, doc
				for i, p := range doc.Parts {
					ud.segments = append(ud.segments, segment{kind: segmentKindOf(p.MediaType), text: p.Body, line: p.BodyLine, encoded: p.Encoded, part: i + 1})
				}
				break
			}
		}
		ud.Format = FormatOpaque
		kind := segOpaque
		if strings.HasPrefix(strings.TrimSpace(text), "#!") {
			kind, ud.Format = segShell, FormatShell
		}
		ud.segments = []segment{{kind: kind, text: text, line: 1}}
	}
	return ud, nil
}

// shiftParseError maps a NodeConfig error inside a MIME part to userData lines.
func shiftParseError(err error, p MIMEPart, n int) error {
	var pe *ParseError
	if !errors.As(err, &pe) {
		return err
	}
	out := *pe
	out.Msg = fmt.Sprintf("MIME part %d (application/node.eks.aws): %s", n, pe.Msg)
	switch {
	case p.Encoded || pe.Line == 0:
		out.Line = p.BodyLine
	default:
		out.Line = pe.Line + p.BodyLine - 1
	}
	return &out
}

// segmentKindOf maps a MIME part media type to how it is run.
func segmentKindOf(mediaType string) segmentKind {
	switch strings.ToLower(mediaType) {
	case "text/x-shellscript", "text/x-sh", "text/cloud-boothook", "text/x-shellscript-per-boot",
		"text/x-shellscript-per-instance", "text/x-shellscript-per-once":
		return segShell
	case "text/cloud-config", "text/cloud-config-archive", "text/jinja2":
		return segCloudConfig
	case "application/node.eks.aws":
		return segNodeConfig
	case "text/x-powershell":
		return segPowerShell
	default:
		return segOpaque
	}
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

// CheckUserData runs every userData rule (KX001–KX008) on text for the given
// AMI family and returns the findings, with Field "spec.userData" and Kind
// and Name left empty for the caller to fill.
func CheckUserData(family, text string) Findings {
	if text == "" {
		return nil
	}
	var out Findings
	if n := len(text); n > MaxUserDataBytes {
		out = append(out, userDataFinding(RuleUserDataSize, 0,
			fmt.Sprintf("is %d bytes; EC2 accepts at most %d bytes (16 KB) before base64, and the autoscaler adds its bootstrap to it", n, MaxUserDataBytes),
			"move large files to S3 or SSM and fetch them at boot with the node role"))
	}
	ud, err := ParseUserData(family, text)
	if err != nil {
		var pe *ParseError
		line, msg := 0, err.Error()
		if errors.As(err, &pe) {
			line, msg = pe.Line, pe.Format+": "+pe.Msg
		}
		out = append(out, userDataFinding(RuleUserDataParse, line,
			fmt.Sprintf("does not parse as %s userData: %s", familyLabel(family), msg),
			formatHint(family)))
		// Still look for unsafe content in the raw text, read as a script.
		kind := segShell
		if strings.HasPrefix(family, "Windows") {
			kind = segPowerShell
		}
		raw := segment{kind: kind, text: text, line: 1}
		out = append(out, scanSecrets(raw)...)
		if family != apisv1.AMIFamilyBottlerocket {
			out = append(out, scanScript(raw)...)
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
		switch s.kind {
		case segShell, segPowerShell, segCloudConfig:
			out = append(out, scanScript(s)...)
		}
	}
	if family != apisv1.AMIFamilyCustom && family != "" {
		for i, d := range ud.NodeConfigs {
			out = append(out, nodeConfigOwnedFindings([]NodeConfigDocument{d}, ud.nodeConfigOffsets[i])...)
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
