package lint

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// exampleSecret is the example secret access key from the AWS IAM User
// Guide (40 characters).
const exampleSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

// mimeDoc wraps parts (each "headers\n\nbody") in a top-level document.
func mimeDoc(boundary string, parts ...string) string {
	return "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"" + boundary + "\"\n\n" + mimeBody(boundary, parts...)
}

// mimeBody is a multipart body: the parts between delimiters.
func mimeBody(boundary string, parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "--%s\n%s\n", boundary, strings.TrimSuffix(p, "\n"))
	}
	fmt.Fprintf(&b, "--%s--\n", boundary)
	return b.String()
}

func gzipText(t testing.TB, s string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func b64(b []byte) string {
	s := base64.StdEncoding.EncodeToString(b)
	var out strings.Builder
	for len(s) > 76 {
		out.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	out.WriteString(s + "\n")
	return out.String()
}

const unsafeScript = "#!/bin/bash\nexport AWS_SECRET_ACCESS_KEY=" + exampleSecret + "\nsystemctl restart kubelet\n"

func TestCheckUserDataNestedAndEncoded(t *testing.T) {
	shell := "Content-Type: text/x-shellscript\n\n"
	inner := func(body string) string {
		return "Content-Type: multipart/mixed; boundary=\"IN\"\n\n" + body
	}
	gz := gzipText(t, unsafeScript)
	deep := shell + unsafeScript
	for i := 0; i < MaxMIMEDepth; i++ {
		deep = inner(strings.ReplaceAll(mimeBody("IN", deep), "IN", fmt.Sprintf("L%d", i)))
		deep = strings.Replace(deep, "boundary=\"IN\"", fmt.Sprintf("boundary=\"L%d\"", i), 1)
	}
	cases := []struct {
		name, family, userData string
		want                   []string // rule IDs, sorted, duplicates kept
	}{
		{"control: nested clean", apisv1.AMIFamilyAL2023, mimeDoc("OUT", inner(mimeBody("IN", shell+"#!/bin/bash\necho ok\n"))), nil},
		{"nested plain", apisv1.AMIFamilyAL2023, mimeDoc("OUT", inner(mimeBody("IN", shell+unsafeScript))), []string{"KX003", "KX005"}},
		{"nested, inner part base64", apisv1.AMIFamilyAL2, mimeDoc("OUT", inner(mimeBody("IN", "Content-Type: text/x-shellscript\nContent-Transfer-Encoding: base64\n\n"+b64([]byte(unsafeScript))))), []string{"KX003", "KX005"}},
		{"nested multipart itself base64", apisv1.AMIFamilyAL2023, mimeDoc("OUT", "Content-Type: multipart/mixed; boundary=\"IN\"\nContent-Transfer-Encoding: base64\n\n"+b64([]byte(mimeBody("IN", shell+unsafeScript)))), []string{"KX003", "KX005"}},
		{"gzip part", apisv1.AMIFamilyAL2023, mimeDoc("OUT", "Content-Type: application/x-gzip\nContent-Transfer-Encoding: base64\n\n"+b64(gz)), []string{"KX003", "KX005"}},
		{"gzip part typed as shell", apisv1.AMIFamilyAL2, mimeDoc("OUT", "Content-Type: text/x-shellscript\nContent-Transfer-Encoding: base64\n\n"+b64(gz)), []string{"KX003", "KX005"}},
		{"gzip of a MIME document", apisv1.AMIFamilyCustom, mimeDoc("OUT", "Content-Type: application/gzip\nContent-Transfer-Encoding: base64\n\n"+b64(gzipText(t, mimeDoc("Z", shell+unsafeScript)))), []string{"KX003", "KX005"}},
		{"encapsulated message", apisv1.AMIFamilyAL2023, mimeDoc("OUT", "Content-Type: message/rfc822\n\nMIME-Version: 1.0\n"+inner(mimeBody("IN", shell+unsafeScript))), []string{"KX003", "KX005"}},
		{"encapsulated single part, base64", apisv1.AMIFamilyAL2, mimeDoc("OUT", "Content-Type: message/rfc822\n\nContent-Type: text/x-shellscript\nContent-Transfer-Encoding: base64\n\n"+b64([]byte(unsafeScript))), []string{"KX003", "KX005"}},
		{"control: encapsulated harmless message", apisv1.AMIFamilyAL2023, mimeDoc("OUT", "Content-Type: message/rfc822\n\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho ok\n"), nil},
		{"line continuation", apisv1.AMIFamilyAL2, "#!/bin/bash\nsystemctl restart \\\n  kubelet\n", []string{"KX003"}},
		{"control: escaped backslash ends the line", apisv1.AMIFamilyAL2, "#!/bin/bash\necho systemctl restart \\\\\nkubelet --version\n", nil},
		{"PowerShell backtick continuation", apisv1.AMIFamilyWindows2022, "<powershell>\nRestart-Service `\n  kubelet\n</powershell>\n", []string{"KX003"}},
		{"text/plain part with a shebang", apisv1.AMIFamilyAL2023, mimeDoc("OUT", "Content-Type: text/plain\n\n"+unsafeScript), []string{"KX003", "KX005"}},
		{"undecodable base64", apisv1.AMIFamilyAL2023, mimeDoc("OUT", "Content-Type: text/x-shellscript\nContent-Transfer-Encoding: base64\n\n!!!notbase64\n"), []string{"KX009"}},
		{"corrupt gzip", apisv1.AMIFamilyAL2023, mimeDoc("OUT", "Content-Type: application/x-gzip\nContent-Transfer-Encoding: base64\n\n"+b64(gz[:len(gz)/2])), []string{"KX009"}},
		{"binary part", apisv1.AMIFamilyAL2, mimeDoc("OUT", "Content-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\n"+b64([]byte{0, 1, 2, 0xff, 0xfe})), []string{"KX009"}},
		{"unknown transfer encoding", apisv1.AMIFamilyAL2023, mimeDoc("OUT", "Content-Type: text/x-shellscript\nContent-Transfer-Encoding: x-uuencode\n\nbegin 644 x\n"), []string{"KX009"}},
		{"too deep (the raw text is still scanned)", apisv1.AMIFamilyAL2023, mimeDoc("OUT", deep), []string{"KX003", "KX005", "KX009"}},
		{"nested document in Custom that karpx cannot walk", apisv1.AMIFamilyCustom, mimeDoc("OUT", "Content-Type: multipart/mixed; boundary=\"IN\"\n\nno delimiter here\n"), []string{"KX009"}},
		{"whole userData base64", apisv1.AMIFamilyAL2023, b64([]byte(unsafeScript)), []string{"KX003", "KX005", "KX010"}},
		{"whole userData base64 of gzip", apisv1.AMIFamilyAL2, b64(gz), []string{"KX003", "KX005", "KX010"}},
		{"control: a short alphanumeric script is not base64", apisv1.AMIFamilyAL2, "true\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := CheckUserData(tc.family, tc.userData)
			var ids []string
			for _, f := range fs {
				ids = append(ids, f.RuleID)
				if f.Severity == SeverityDeny && (f.Field == "" || f.Message == "" || f.Fix == "") {
					t.Errorf("finding without field, message or fix: %+v", f)
				}
			}
			want := strings.Join(tc.want, ",")
			sort.Strings(ids)
			if strings.Join(ids, ",") != want {
				t.Fatalf("got %v, want [%s]\n%s", fs, want, tc.userData)
			}
		})
	}
}

// TestCustomFamilyWithAlias: amiFamily Custom with an alias term passes
// userData through verbatim (the alias only selects images), so MIME
// userData is not parsed as the alias's TOML or NodeConfig.
func TestCustomFamilyWithAlias(t *testing.T) {
	custom := apisv1.AMIFamilyCustom
	ud := mimeDoc("B", "Content-Type: text/x-shellscript\n\n#!/bin/bash\necho hi\n")
	nc := &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{
		AMIFamily:        &custom,
		AMISelectorTerms: []apisv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}},
		UserData:         &ud,
	}}
	if fs := CheckEC2NodeClass(nc); len(fs) != 0 {
		t.Fatalf("Custom family with alias: got %v, want none", fs)
	}
	// Control: without amiFamily the alias's family (Bottlerocket, TOML) applies.
	nc.Spec.AMIFamily = nil
	if fs := CheckEC2NodeClass(nc); len(fs) != 1 || fs[0].RuleID != RuleUserDataParse {
		t.Fatalf("Bottlerocket alias without amiFamily: got %v, want one KX002", fs)
	}
}

// Many small gzip parts may not decompress to more than MaxDecodedBytes in
// total: each part alone is within the limit, together they are not.
func TestGzipBudgetIsPerDocument(t *testing.T) {
	chunk := "#!/bin/bash\n" + strings.Repeat("# padding\n", 300<<10/10) // ~300 KiB each
	part := "Content-Type: application/x-gzip\nContent-Transfer-Encoding: base64\n\n" + b64(gzipText(t, chunk))
	three := mimeDoc("B", part, part, part)
	four := mimeDoc("B", part, part, part, part)
	if fs := CheckUserData(apisv1.AMIFamilyCustom, three); hasRule(fs, RuleUserDataUninspectable) {
		t.Fatalf("three parts (~900 KiB) denied: %v", fs)
	}
	if fs := CheckUserData(apisv1.AMIFamilyCustom, four); !hasRule(fs, RuleUserDataUninspectable) {
		t.Fatalf("four parts (~1.2 MiB decompressed) not denied: %v", fs)
	}
}

func hasRule(fs Findings, id string) bool {
	for _, f := range fs {
		if f.RuleID == id {
			return true
		}
	}
	return false
}
