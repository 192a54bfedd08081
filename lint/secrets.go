package lint

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/logging"
)

// secretDecodeDepth is how many of gitleaks' own decoding passes (base64,
// hex, percent-encoding of substrings) run after the plain scan of a text,
// so that a token inside an encoded field of another format (a kubeconfig's
// client-key-data, a base64 TOML value) is found. karpx's own decoding
// (base64 userData, MIME transfer encodings, gzip, write_files encodings)
// happens before and each decoded text is scanned again.
const secretDecodeDepth = 2

// gitleaksVersion is the rule set's source: github.com/zricethezav/gitleaks/v8
// v8.30.1, config/gitleaks.toml (222 rules), pinned in go.mod.
const gitleaksVersion = "gitleaks v8.30.1"

// genericRuleID is gitleaks' rule for key, token, secret and password
// assignments of any service. Its expression has no literal prefix and
// its keywords ("key", "api", "auth", "token", …) are on many userData
// lines, so it runs apart from the other rules: on the lines holding one
// of its keywords only, without the decoding passes (karpx's own decoded
// parts and files are scanned with it all the same).
const genericRuleID = "generic-api-key"

// secretScanner is one gitleaks detector and the per-line prefilter of
// its rules' keywords.
type secretScanner struct {
	// d runs the rules with the decoding passes (when decoded), plain
	// without: on a text with nothing the decoder would decode, the
	// passes only cost their expressions' scan (about 60 µs a review).
	d, plain *detect.Detector
	// keywords indexes its rules' keywords (lower case) by their first
	// two bytes. The detector's own prefilter is an Aho-Corasick trie of
	// dense 256-way states, megabytes for the full rule set (the secret
	// scan adds about 19 MB of live heap in all, mostly such tries); one
	// more per scanner for the per-line check cost 5 MB.
	keywords map[[2]byte][]string
	// decoded: lines the detector's decoder would decode are kept too.
	decoded bool
}

var (
	secretsOnce sync.Once
	// secretsSpecific runs every rule but genericRuleID, with
	// secretDecodeDepth decoding passes; secretsGeneric runs
	// genericRuleID alone.
	secretsSpecific, secretsGeneric *secretScanner
	secretsErr                      error
)

// secretScanners returns the two process-wide scanners built from gitleaks'
// default rule set, or the error that kept them from being built (it never
// fails with the pinned version; a test asserts it). Detectors are safe
// for concurrent DetectString calls: their rules and prefilters are
// read-only.
func secretScanners() (specific, generic *secretScanner, err error) {
	secretsOnce.Do(func() {
		// gitleaks logs through a global zerolog logger to stderr; the
		// library use here reports through findings only.
		logging.Logger = logging.Logger.Level(zerolog.Disabled)
		v := viper.New()
		v.SetConfigType("toml")
		if err := v.ReadConfig(strings.NewReader(config.DefaultConfig)); err != nil {
			secretsErr = fmt.Errorf("reading the gitleaks default rules: %w", err)
			return
		}
		var vc config.ViperConfig
		if err := v.Unmarshal(&vc); err != nil {
			secretsErr = fmt.Errorf("decoding the gitleaks default rules: %w", err)
			return
		}
		cfg, err := vc.Translate()
		if err != nil {
			secretsErr = fmt.Errorf("compiling the gitleaks default rules: %w", err)
			return
		}
		if _, ok := cfg.Rules[genericRuleID]; !ok {
			secretsErr = fmt.Errorf("the gitleaks default rules have no %s rule", genericRuleID)
			return
		}
		secretsSpecific = newSecretScanner(cfg, func(id string) bool { return id != genericRuleID }, secretDecodeDepth)
		secretsGeneric = newSecretScanner(cfg, func(id string) bool { return id == genericRuleID }, 0)
	})
	return secretsSpecific, secretsGeneric, secretsErr
}

// newSecretScanner returns a scanner of the rules of cfg that keep selects.
func newSecretScanner(cfg config.Config, keep func(string) bool, decodeDepth int) *secretScanner {
	sub := cfg
	sub.Rules = map[string]config.Rule{}
	sub.Keywords = map[string]struct{}{}
	sub.OrderedRules = nil
	for _, id := range cfg.OrderedRules {
		r := cfg.Rules[id]
		if !keep(id) {
			continue
		}
		sub.Rules[id] = r
		sub.OrderedRules = append(sub.OrderedRules, id)
		for _, k := range r.Keywords {
			sub.Keywords[strings.ToLower(k)] = struct{}{}
		}
	}
	d := detect.NewDetector(sub)
	d.MaxDecodeDepth = decodeDepth
	plain := d
	if decodeDepth > 0 {
		plain = detect.NewDetector(sub)
	}
	kw := make([]string, 0, len(sub.Keywords))
	for k := range sub.Keywords {
		kw = append(kw, k)
	}
	index := map[[2]byte][]string{}
	for _, k := range kw {
		if len(k) < 2 {
			k += "\x00" // never in text; gitleaks has no one-byte keyword
		}
		p := [2]byte{k[0], k[1]}
		index[p] = append(index[p], k)
	}
	return &secretScanner{d: d, plain: plain, keywords: index, decoded: decodeDepth > 0}
}

// awsSecretNameRE matches the names an AWS secret access key is assigned
// to (aws_secret_access_key, AWS_SECRET_ACCESS_KEY, SecretAccessKey, …), as
// secretKeyRE does.
var awsSecretNameRE = regexp.MustCompile(`(?i)secret_?access_?key|aws_?secret_?key|secretkey`)

// gitleaksRuleFor maps a gitleaks rule ID to the karpx rule its finding is
// reported under: AWS access key IDs are KX004 and private keys KX006, as
// before; every other credential is KX012.
func gitleaksRuleFor(id string) string {
	switch id {
	case "aws-access-token":
		return RuleUserDataAccessKey
	case "private-key":
		return RuleUserDataPrivateKey
	}
	return RuleUserDataCredential
}

// scanDetectorSecrets runs the gitleaks rule set over s.text (and, through
// the detector's own decoding passes, over base64/hex/percent-encoded
// substrings of it) and returns one finding per rule and line. Values are
// never echoed: only the first four characters of the secret. Placeholders
// (isPlaceholderSecret) and public material (isPublicMaterial) are not
// reported.
func scanDetectorSecrets(s segment) []Finding {
	specific, generic, err := secretScanners()
	if err != nil || strings.TrimSpace(s.text) == "" {
		return nil
	}
	var out []Finding
	specificAt := map[int]bool{} // userData lines with a specific rule's finding
	for _, sc := range []*secretScanner{specific, generic} {
		text, any, encoded := sc.candidateText(s.text)
		if !any {
			continue
		}
		d := sc.plain
		if encoded {
			d = sc.d
		}
		for _, f := range d.DetectString(text) {
			if isPlaceholderSecret(f.Secret) || isPublicMaterial(f.Line, f.Secret) {
				continue
			}
			rule := gitleaksRuleFor(f.RuleID)
			if rule == RuleUserDataCredential && awsSecretNameRE.MatchString(f.Match) {
				// A generic key assignment that is an AWS secret access key
				// assigned to a name that says so: KX005, as the pattern says.
				rule = RuleUserDataSecretKey
			}
			i := f.StartLine // 0-based line of the match in s.text
			if sc == generic && specificAt[s.lineOf(i)] {
				continue // the service's own rule named it (gitleaks drops the generic match too)
			}
			if sc == specific {
				specificAt[s.lineOf(i)] = true
			}
			prefix := f.Secret
			if len(prefix) > 4 {
				prefix = prefix[:4]
			}
			fd := userDataFinding(rule, s.lineOf(i),
				fmt.Sprintf("contains a credential (%s rule %s: %s; value %s…)%s", gitleaksVersion, f.RuleID, strings.TrimSuffix(f.Description, "."), prefix, s.where(i)),
				"remove it and rotate it; fetch credentials at boot from Secrets Manager or SSM Parameter Store with the node role")
			fd.secret = f.Secret
			out = append(out, fd)
		}
	}
	return out
}

// placeholderWords are lower-case substrings of values that documentation
// and templates use in place of a real credential (AWS's documented example
// key AKIAIOSFODNN7EXAMPLE, "<your-token>", "${TOKEN}", "changeme", …).
var placeholderWords = []string{"example", "placeholder", "changeme", "change-me", "replace", "your", "dummy", "redacted", "sample", "xxxx", "****", "<", "${", "{{", "$("}

// isPlaceholderSecret reports whether secret reads as a placeholder rather
// than a credential: a placeholder word, or at most three distinct
// characters ("aaaaaaaa", "0000-0000").
func isPlaceholderSecret(secret string) bool {
	l := strings.ToLower(secret)
	for _, w := range placeholderWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	seen := map[rune]bool{}
	for _, r := range l {
		seen[r] = true
		if len(seen) > 3 {
			return false
		}
	}
	return true
}

// publicMarkers are line contents that mark public key material: OpenSSH
// public keys (RFC 4253 section 6.6 key types, as authorized_keys lists
// them) and PEM public keys and certificates (RFC 7468 labels).
var publicMarkers = []string{"ssh-rsa ", "ssh-ed25519 ", "ssh-dss ", "ecdsa-sha2-", "sk-ssh-ed25519@", "sk-ecdsa-sha2-",
	"-----BEGIN PUBLIC KEY-----", "-----BEGIN RSA PUBLIC KEY-----", "-----BEGIN CERTIFICATE-----", "-----BEGIN PGP PUBLIC KEY BLOCK-----",
	"certificate-authority-data", "certificateAuthority", "client-certificate-data", "ca.crt", "cluster-certificate"}

// isPublicMaterial reports whether a finding's line or secret is public key
// material: the line holds a public key or certificate marker, or the
// secret is base64 of a PEM public key or certificate (a kubeconfig's
// certificate-authority-data).
func isPublicMaterial(line, secret string) bool {
	for _, m := range publicMarkers {
		if strings.Contains(line, m) {
			return true
		}
	}
	if dec, err := base64.StdEncoding.DecodeString(secret); err == nil {
		t := string(dec)
		return strings.HasPrefix(t, "-----BEGIN CERTIFICATE-----") || strings.HasPrefix(t, "-----BEGIN PUBLIC KEY-----")
	}
	return false
}

// candidateText returns text with the lines emptied that none of the
// scanner's rules or decoding passes can match on, and whether any line is
// left, and whether a kept line holds an encoded run (encodedRun). A line is kept when it contains one of its rules' keywords (the
// detector's own prefilter, which it otherwise applies to the whole text,
// so that "api" in one apiVersion line would run the generic rule's
// expression over every line), the line after one that ends in ":" or "="
// (a YAML or shell value on the next line), or, with decoding, what the
// detector's decoder looks for (encodedRun). Line breaks are kept, so line numbers hold;
// a PEM block's body lines are base64 runs and are kept.
func (sc *secretScanner) candidateText(text string) (out string, any, encoded bool) {
	var b strings.Builder
	var lower []byte
	kept, carry := 0, false
	for i, l := range eachLine(text) {
		if i > 0 {
			b.WriteByte('\n')
		}
		lower = lower[:0]
		for j := 0; j < len(l); j++ {
			lower = append(lower, lowerASCII(l[j]))
		}
		keyword := sc.hasKeyword(lower)
		enc := sc.decoded && encodedRun(l)
		if keyword || carry || enc {
			b.WriteString(l)
			kept++
		}
		encoded = encoded || enc
		t := strings.TrimRight(l, " \t\r")
		carry = keyword && (strings.HasSuffix(t, ":") || strings.HasSuffix(t, "="))
	}
	return b.String(), kept > 0, encoded
}

// encodedRun reports whether l holds what gitleaks' decoder decodes and
// what can hide a credential: a base64 run of 20 or more characters of
// [A-Za-z0-9_/+-] with an upper-case letter, a lower-case letter and a
// digit (the base64 of 15 or more bytes of text; the decoder's own pattern
// takes any 16, which every long identifier or path matches), a run of 32
// or more hex digits, "%" and two hex digits, or a "U+"/"\\u" escape
// (gitleaks detect/codec/encodings.go).
func encodedRun(l string) bool {
	run, hex := 0, 0
	upper, lower, digit := false, false, false
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c == '%' && i+2 < len(l) && isHex(l[i+1]) && isHex(l[i+2]) ||
			c == '+' && i > 0 && l[i-1] == 'U' || (c == 'u' || c == 'U') && i > 0 && l[i-1] == '\\' {
			return true
		}
		if isHex(c) {
			if hex++; hex >= 32 {
				return true
			}
		} else {
			hex = 0
		}
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= '0' && c <= '9':
			digit = true
		case c == '_' || c == '/' || c == '+' || c == '-':
		default:
			run, upper, lower, digit = 0, false, false, false
			continue
		}
		if run++; run >= 20 && upper && lower && digit {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// hasKeyword reports whether lower (a lower-cased line) contains one of
// the scanner's keywords.
func (sc *secretScanner) hasKeyword(lower []byte) bool {
	for i := 0; i+1 < len(lower); i++ {
		for _, k := range sc.keywords[[2]byte{lower[i], lower[i+1]}] {
			if len(lower)-i >= len(k) && string(lower[i:i+len(k)]) == k {
				return true
			}
		}
	}
	return false
}
