package lint

import (
	"fmt"
	"strings"
)

// PowerShellScript is parsed Windows userData.
type PowerShellScript struct {
	// Tagged is true when the script is wrapped in <powershell> tags.
	Tagged bool
	// Body is the script without the tags.
	Body string
	// BodyLine is the 1-based line of Body's first line in the userData.
	BodyLine int
}

// ParsePowerShell parses Windows userData: PowerShell, with or without
// <powershell>…</powershell> tags (Amazon EC2 User Guide, "Run commands on
// your Windows instance at launch": EC2Launch runs the content of the
// <powershell> tags; Karpenter's Windows bootstrap wraps untagged content).
// When tags are present there must be exactly one opening and one closing
// tag, in that order; a missing or repeated tag is a *ParseError naming its
// line.
func ParsePowerShell(text string) (*PowerShellScript, error) {
	lines := splitLines(text)
	openLine, closeLine := 0, 0
	for i, l := range lines {
		for _, c := range []struct {
			tag string
			at  *int
		}{{"<powershell>", &openLine}, {"</powershell>", &closeLine}} {
			if n := countFoldASCII(l, c.tag); n > 0 {
				if *c.at != 0 || n > 1 {
					return nil, &ParseError{Format: "PowerShell", Line: i + 1, Msg: fmt.Sprintf("%s appears more than once; wrap the script in one <powershell>…</powershell> pair", c.tag)}
				}
				*c.at = i + 1
			}
		}
	}
	switch {
	case openLine == 0 && closeLine == 0:
		return &PowerShellScript{Body: text, BodyLine: 1}, nil
	case openLine == 0:
		return nil, &ParseError{Format: "PowerShell", Line: closeLine, Msg: "</powershell> without an opening <powershell>"}
	case closeLine == 0:
		return nil, &ParseError{Format: "PowerShell", Line: openLine, Msg: "<powershell> is never closed; add </powershell> after the script"}
	}
	lo := indexFoldASCII(text, "<powershell>") + len("<powershell>")
	hi := indexFoldASCII(text, "</powershell>")
	if hi < lo {
		return nil, &ParseError{Format: "PowerShell", Line: closeLine, Msg: "</powershell> comes before <powershell>"}
	}
	body := text[lo:hi]
	return &PowerShellScript{Tagged: true, Body: body, BodyLine: openLine}, nil
}

// indexFoldASCII is strings.Index ignoring ASCII case; sub must be ASCII.
// Unlike lower-casing the whole text first, it keeps byte offsets valid.
func indexFoldASCII(s, sub string) int {
	if sub == "" {
		return 0
	}
	first := lowerASCII(sub[0])
	for i := 0; i+len(sub) <= len(s); i++ {
		if lowerASCII(s[i]) == first && strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// countFoldASCII counts non-overlapping occurrences of ASCII sub in s,
// ignoring ASCII case.
func countFoldASCII(s, sub string) int {
	n := 0
	for {
		i := indexFoldASCII(s, sub)
		if i < 0 {
			return n
		}
		n++
		s = s[i+len(sub):]
	}
}
