package lint

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sanitize makes text from the input (file names, object names, kinds,
// messages that quote them) safe to print on a terminal: control
// characters (C0 but tab, DEL, C1 such as the CSI U+009B) and bytes that
// are not UTF-8 are written as Go escapes (\x1b, \u009b), so that a name
// in a manifest cannot move the cursor, recolour or rewrite what was
// printed before it. kubectl's printers.EscapeTerminal covers only ESC
// and CR. Text without such characters is returned as is.
func Sanitize(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case r != '\t' && (unicode.IsControl(r) || r == 0x7f):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c >= 0x7f {
			return needsEscapeSlow(s)
		}
	}
	return false
}

// needsEscapeSlow is needsEscape for text with bytes outside printable
// ASCII: UTF-8 letters are fine, control runes and bad bytes are not.
func needsEscapeSlow(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if r != '\t' && (unicode.IsControl(r) || r == 0x7f) {
			return true
		}
	}
	return false
}
