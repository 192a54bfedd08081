package userdata

import (
	"encoding/base64"
	"strings"
	"testing"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/lint"
)

// The merge copies each user part as written, so a base64 part keeps its
// Content-Transfer-Encoding and a nested multipart keeps its boundary: the
// merged document, read back with the parser the webhook uses, carries the
// user's scripts decoded exactly as the user wrote them.
func TestMergeKeepsEncodedAndNestedParts(t *testing.T) {
	script := "#!/bin/bash\necho encoded user part\n"
	custom := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"OUT\"\n\n" +
		"--OUT\nContent-Type: text/x-shellscript\nContent-Transfer-Encoding: base64\n\n" + base64.StdEncoding.EncodeToString([]byte(script)) + "\n" +
		"--OUT\nContent-Type: multipart/mixed; boundary=\"IN\"\n\n--IN\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho nested\n--IN--\n" +
		"--OUT--\n"
	for _, family := range []string{v1.AMIFamilyAL2023, v1.AMIFamilyAL2} {
		out, err := Generate(opts(family, custom))
		if err != nil {
			t.Fatalf("%s: %v", family, err)
		}
		doc, err := lint.ParseMIME(out)
		if err != nil {
			t.Fatalf("%s: merged userData does not parse: %v\n%s", family, err, out)
		}
		leaves := doc.Leaves()
		if len(leaves) != 3 || leaves[0].Body != script || leaves[0].Path != "1" ||
			!strings.Contains(leaves[1].Body, "echo nested") || leaves[1].Path != "2.1" || leaves[2].Path != "3" {
			t.Fatalf("%s: leaves %+v\n%s", family, leaves, out)
		}
		// karpx's own NodeConfig sets the owned settings (KX008
		// warnings); nothing may deny.
		for _, f := range lint.CheckUserData(family, out) {
			if f.Severity == lint.SeverityDeny {
				t.Fatalf("%s: merged userData denied: %v", family, f)
			}
		}
	}
}

// What the webhook denies as undecodable cannot be merged either.
func TestMergeRejectsUndecodablePart(t *testing.T) {
	custom := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\nContent-Transfer-Encoding: base64\n\n!!!\n--B--\n"
	if _, err := Generate(opts(v1.AMIFamilyAL2023, custom)); err == nil || !strings.Contains(err.Error(), "spec.userData") {
		t.Fatalf("got %v, want a spec.userData error", err)
	}
	if fs := lint.CheckUserData(v1.AMIFamilyAL2023, custom); len(fs) != 1 || fs[0].RuleID != lint.RuleUserDataUninspectable {
		t.Fatalf("lint: got %v, want KX009", fs)
	}
}
