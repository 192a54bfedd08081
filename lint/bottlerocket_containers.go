package lint

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// bottlerocketContainerKinds are the Bottlerocket settings whose entries
// carry a base64 user-data that the container reads at start (Bottlerocket
// docs, "Settings": settings.bootstrap-containers.<name>.user-data and
// settings.host-containers.<name>.user-data, "base64-encoded"). Bootstrap
// containers run with superpowers before kubelet starts; the admin host
// container reads its user-data as JSON (SSH keys), others as the image
// decides, commonly a script.
var bottlerocketContainerKinds = []string{"bootstrap-containers", "host-containers"}

// containerFindings decodes every container's user-data and inspects it as
// userData's own parts are: secrets in any case (KX004–KX006, KX012), and
// the rules of scripts and cloud-config when it reads as one (a "#!" or
// "#cloud-config" first line). A user-data that is not base64 is refused
// as a part karpx cannot decode (KX009). Findings point at the user-data
// key's line and name the setting.
func (s *BottlerocketSettings) containerFindings() []Finding {
	settings, _ := s.Tree["settings"].(map[string]any)
	var out []Finding
	for _, kind := range bottlerocketContainerKinds {
		containers, _ := settings[kind].(map[string]any)
		names := make([]string, 0, len(containers))
		for n := range containers {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			c, _ := containers[n].(map[string]any)
			ud, ok := c["user-data"].(string)
			if !ok || strings.TrimSpace(ud) == "" {
				continue
			}
			key := "settings." + kind + "." + n + ".user-data"
			line := s.Lines[key]
			raw, err := base64.StdEncoding.DecodeString(stripSpace(ud))
			if err != nil {
				out = append(out, userDataFinding(RuleUserDataUninspectable, line,
					fmt.Sprintf("%s is not base64 (%v): Bottlerocket refuses the setting and karpx cannot read what the container receives", key, err),
					"base64-encode the container's user-data (base64 -w0 file)"))
				continue
			}
			text := string(raw)
			if !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0 {
				continue // binary data for the image; secrets in it are beyond reach
			}
			seg := segment{kind: guessKind(text), text: text, line: line, encoded: true}
			fs := scanSecrets(seg)
			if seg.kind != segOpaque {
				fs = append(fs, scanSegment(seg, 0)...)
			}
			for _, f := range fs {
				f.Message += " (in " + key + ", decoded)"
				out = append(out, f)
			}
		}
	}
	return out
}
