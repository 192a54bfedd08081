package lint

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"sync"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
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

var (
	secretsOnce     sync.Once
	secretsDetector *detect.Detector
	secretsErr      error
	// secretsKeywords holds every rule's keywords (lower case), the
	// detector's own prefilter, applied per line by secretCandidateText.
	secretsKeywords *ahocorasick.Trie
)

// secretDetector returns the process-wide gitleaks detector built from its
// default rule set, or the error that kept it from being built (it never
// fails with the pinned version; a test asserts it). The detector is safe
// for concurrent DetectString calls: its rules and prefilter are read-only.
func secretDetector() (*detect.Detector, error) {
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
		d := detect.NewDetector(cfg)
		d.MaxDecodeDepth = secretDecodeDepth
		secretsDetector = d
		kw := make([]string, 0, len(cfg.Keywords))
		for k := range cfg.Keywords {
			kw = append(kw, strings.ToLower(k))
		}
		secretsKeywords = ahocorasick.NewTrieBuilder().AddStrings(kw).Build()
	})
	return secretsDetector, secretsErr
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
	d, err := secretDetector()
	if err != nil || strings.TrimSpace(s.text) == "" {
		return nil
	}
	text, any := secretCandidateText(s.text)
	if !any {
		return nil
	}
	var out []Finding
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

// secretCandidateText returns text with the lines emptied that no gitleaks
// rule or decoding pass can match on, and whether any line is left. A line
// is kept when it contains a rule keyword (the detector's own prefilter,
// which it otherwise applies to the whole text, so that "api" in one
// apiVersion line runs the generic rule's regular expression over every
// line), the line after such a line (a YAML value on the next line), or
// what the detector's decoder looks for: a run of 16 or more base64 or
// hex characters, a percent escape, or a Unicode escape (gitleaks
// detect/codec/encodings.go). Line breaks are kept, so line numbers hold;
// a PEM block's body lines are base64 runs and are kept. On ordinary
// userData this leaves a few lines, and the cost stays off the webhook's
// path (BenchmarkCheckUserData).
func secretCandidateText(text string) (string, bool) {
	var b strings.Builder
	var lower []byte
	kept, prevKeyword := 0, false
	for i, l := range eachLine(text) {
		if i > 0 {
			b.WriteByte('\n')
		}
		lower = lower[:0]
		for j := 0; j < len(l); j++ {
			lower = append(lower, lowerASCII(l[j]))
		}
		keyword := secretsKeywords.MatchFirst(lower) != nil
		if keyword || prevKeyword || encodedRun(l) {
			b.WriteString(l)
			kept++
		}
		prevKeyword = keyword
	}
	return b.String(), kept > 0
}

// encodedRun reports whether l has what gitleaks' decoder decodes: 16 or
// more characters of [A-Za-z0-9_/+-] in a row (its base64 and hex
// patterns), "%" and two hex digits, or a "U+"/"\\u" escape.
func encodedRun(l string) bool {
	run := 0
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c == '%' && i+2 < len(l) && isHex(l[i+1]) && isHex(l[i+2]) ||
			c == '+' && i > 0 && l[i-1] == 'U' || (c == 'u' || c == 'U') && i > 0 && l[i-1] == '\\' {
			return true
		}
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '/' || c == '+' || c == '-' {
			if run++; run >= 16 {
				return true
			}
			continue
		}
		run = 0
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
