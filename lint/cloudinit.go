package lint

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// This file dispatches each piece of userData by what cloud-init does with
// it (cloud-init documentation, "User data formats"): shell scripts and
// cloud-config go to their scanners (shell_findings.go, cloudconfig.go),
// the formats that fetch or run code karpx cannot read (#include,
// #part-handler) are KX009, and #cloud-config-archive is unpacked into its
// parts, which are scanned in turn.

// maxSegmentDepth bounds parts nested in parts (#cloud-config-archive in
// an archive).
const maxSegmentDepth = 4

// scanSegment reports KX002, KX003, KX006, KX007 and KX009 findings in one
// piece of userData, by what cloud-init does with it.
func scanSegment(s segment, depth int) []Finding {
	if depth > maxSegmentDepth {
		return []Finding{uninspectable(s, 0, "parts nested more than 4 deep in #cloud-config-archive")}
	}
	switch s.kind {
	case segShell:
		return scanShellSegment(s)
	case segPowerShell:
		return scanScript(s)
	case segCloudConfig:
		return scanCloudConfig(s, depth)
	case segJinja:
		return scanJinja(s, depth)
	case segCloudConfigArchive:
		return scanCloudConfigArchive(s, depth)
	case segInclude:
		return []Finding{uninspectable(s, 0, "is an #include part: cloud-init downloads more userData from its URLs at boot, which karpx cannot inspect")}
	case segPartHandler:
		return []Finding{uninspectable(s, 0, "is a #part-handler: cloud-init runs its Python code on every part, which karpx cannot model")}
	}
	return nil
}

func uninspectable(s segment, i int, msg string) Finding {
	return userDataFinding(RuleUserDataUninspectable, s.lineOf(i), msg+s.where(i),
		"write the commands as a shell script or cloud-config in spec.userData itself")
}

// scanCloudConfigArchive walks a #cloud-config-archive: a YAML list of
// parts, each a string or a mapping with type and content (cloud-init docs,
// "User data formats", "Cloud config archive"); a part without a
// recognisable type is cloud-config.
func scanCloudConfigArchive(s segment, depth int) []Finding {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s.text), &doc); err != nil {
		line := yamlErrorLine(err)
		return []Finding{userDataFinding(RuleUserDataParse, s.lineOf(line-1),
			"#cloud-config-archive does not parse as YAML: "+strings.TrimPrefix(err.Error(), "yaml: ")+s.where(line-1),
			"fix the YAML; it must be a list of parts with type and content")}
	}
	expanded, err := expandYAML(&doc)
	if err != nil {
		be := err.(*yamlBoundError)
		return []Finding{uninspectable(s, be.line-1, "#cloud-config-archive "+be.msg)}
	}
	doc = *expanded
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil
	}
	var out []Finding
	for j, item := range doc.Content[0].Content {
		var content *yaml.Node
		typ := ""
		switch item.Kind {
		case yaml.ScalarNode:
			content = item
		case yaml.MappingNode:
			content = mapValue(item, "content")
			typ, _ = scalarAt(item, "type")
		}
		if content == nil || content.Kind != yaml.ScalarNode {
			continue
		}
		kind := guessKind(content.Value)
		if typ != "" {
			kind = segmentKindOf(typ, content.Value)
		} else if kind == segOpaque {
			kind = segCloudConfig
		}
		sub := segment{kind: kind, text: content.Value, line: s.lineOf(content.Line - 1), encoded: s.encoded, part: s.part}
		if content.Style == yaml.LiteralStyle {
			sub.line++
		} else {
			sub.encoded = true // quoted or folded text: lines do not map
			if sub.part == "" {
				sub.part = fmt.Sprintf("archive[%d]", j)
			}
		}
		out = append(out, scanSegment(sub, depth+1)...)
	}
	return out
}
