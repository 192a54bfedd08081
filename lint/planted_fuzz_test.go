package lint

import (
	"bytes"
	"fmt"
	"mime/quotedprintable"
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// plantedLines are unsafe lines one of which FuzzPlantedUnsafeLine hides
// in userData, with the rule that must deny it.
var plantedLines = []struct{ text, rule string }{
	{"systemctl restart kubelet", RuleUserDataNodeRestart},
	{"sudo systemctl --no-block stop containerd.service", RuleUserDataNodeRestart},
	{"systemctl restart \\\n  kubelet", RuleUserDataNodeRestart},
	{"echo start && reboot", RuleUserDataNodeRestart},
	{"export AWS_SECRET_ACCESS_KEY=" + exampleSecret, RuleUserDataSecretKey},
	{"aws configure set aws_access_key_id AKIA4Q6ZP7M2XJ3KD5WN", RuleUserDataAccessKey},
	{"git clone https://oauth2:glpat-Rk7vQ2mX9pL4sT8wB3nZ@gitlab.example.com/ops/tools.git", RuleUserDataCredential},
	{"export SLACK_TOKEN=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", RuleUserDataCredential},
}

// plantedBuilder turns fuzz bytes into a userData document: each byte
// read chooses one thing (nesting, encoding, content type, line endings).
type plantedBuilder struct {
	choices []byte
	n       int
	t       *testing.T
	// wraps counts message/rfc822 encapsulations so far.
	wraps int
}

func (b *plantedBuilder) pick(n int) int {
	if len(b.choices) == 0 {
		return 0
	}
	c := b.choices[b.n%len(b.choices)]
	b.n++
	return int(c) % n
}

// part returns one MIME part (headers, blank line, body) carrying script
// at the given depth below the top level.
func (b *plantedBuilder) part(script string, depth, level int) string {
	var header, body string
	if level < depth {
		boundary := fmt.Sprintf("=_L%d_%d", level, b.pick(1000))
		inner := mimeBody(boundary, b.part(script, depth, level+1))
		if b.pick(2) == 1 { // a sibling leaf before the nested one
			inner = mimeBody(boundary, "Content-Type: text/x-shellscript\n\n#!/bin/sh\necho sibling\n", b.part(script, depth, level+1))
		}
		header, body = fmt.Sprintf("Content-Type: multipart/mixed; boundary=%q\n", boundary), inner
		// The multipart encapsulated in a message/rfc822 part, which costs
		// one more level of MaxMIMEDepth (the top document is level 1).
		if depth+1+b.wraps+1 <= MaxMIMEDepth && b.pick(4) == 0 {
			b.wraps++
			body = "MIME-Version: 1.0\n" + header + "\n" + body
			header = "Content-Type: message/rfc822\n"
		}
	} else {
		types := []string{"text/x-shellscript", "text/cloud-boothook", "text/plain", "text/x-shellscript-per-boot"}
		ct := types[b.pick(len(types))]
		header, body = "Content-Type: "+ct+"; charset=\"us-ascii\"\n", script
	}
	switch b.pick(5) {
	case 1:
		header += "Content-Transfer-Encoding: base64\n"
		body = b64([]byte(body))
	case 2:
		var buf bytes.Buffer
		w := quotedprintable.NewWriter(&buf)
		_, _ = w.Write([]byte(body))
		_ = w.Close()
		header += "Content-Transfer-Encoding: quoted-printable\n"
		body = buf.String() + "\n"
	case 3:
		gz := []string{"application/x-gzip", "application/gzip"}
		if level < depth {
			// cloud-init reads a decompressed part by its content, so a
			// compressed multipart carries its own MIME header.
			body = "MIME-Version: 1.0\n" + strings.TrimSuffix(header, "\n") + "\n\n" + body
		}
		header = "Content-Type: " + gz[b.pick(2)] + "\nContent-Transfer-Encoding: base64\n"
		body = b64(gzipText(b.t, body))
	case 4:
		header += "Content-Transfer-Encoding: 7bit\n"
	}
	return header + "\n" + body
}

// FuzzPlantedUnsafeLine is the differential fuzz target of issue 14: it
// hides an unsafe line in a shell script inside random MIME nesting (up to
// MaxMIMEDepth levels, some encapsulated in message/rfc822) and encodings (7bit, base64, quoted-printable, gzip,
// CRLF line ends) and requires the rule for that line to deny, for every
// family that reads MIME. Run it with
// `go test ./lint -run '^$' -fuzz FuzzPlantedUnsafeLine -fuzztime 60s`.
func FuzzPlantedUnsafeLine(f *testing.F) {
	for _, s := range [][]byte{{}, {0}, {1, 1, 1}, {2, 3, 4, 5}, {7, 1, 3, 3, 3}, {6, 2, 2, 2, 2, 2, 2}, {5, 4, 0, 9, 3, 1, 2}, {3, 7, 5, 1, 1, 3, 0, 2}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, choices []byte) {
		b := &plantedBuilder{choices: choices, t: t}
		planted := plantedLines[b.pick(len(plantedLines))]
		depth := b.pick(MaxMIMEDepth - 1)
		script := "#!/bin/bash\necho before\n" + planted.text + "\necho after\n"
		doc := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"=_TOP\"\n\n" + mimeBody("=_TOP", b.part(script, depth, 0))
		if b.pick(2) == 1 {
			doc = strings.ReplaceAll(doc, "\n", "\r\n")
		}
		for _, fam := range []string{apisv1.AMIFamilyAL2, apisv1.AMIFamilyAL2023, apisv1.AMIFamilyCustom} {
			fs := CheckUserData(fam, doc)
			found := false
			for _, fd := range fs {
				if fd.RuleID == planted.rule && fd.Severity == SeverityDeny {
					found = true
				}
				if fd.RuleID == RuleUserDataParse || fd.RuleID == RuleUserDataUninspectable {
					t.Fatalf("%s: well-formed userData reported as %s: %s\n%s", fam, fd.RuleID, fd.String(), doc)
				}
			}
			if !found {
				t.Fatalf("%s: planted %q (depth %d) not denied by %s; findings %v\n%s", fam, planted.text, depth, planted.rule, fs, doc)
			}
		}
	})
}
