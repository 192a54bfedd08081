package lint

import (
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// A credential in a file the sandbox sees a script write is reported
// with the gitleaks rule and the file's path, however the script built
// it; a placeholder is not.
func TestSecretsInWrittenFiles(t *testing.T) {
	const head, tail = "ghp_R2kq8vD1xY7mZ3pL", "5nB9cT4wQ6eH0jA2sF8u" // one GitHub token in two pieces
	for _, c := range []struct {
		name, family, text, path string // path "" admitted
	}{
		{"printf pieces", apisv1.AMIFamilyAL2023, "#!/bin/bash\nprintf '%s%s\\n' '" + head + "' '" + tail + "' > /etc/gh-token\n", "/etc/gh-token"},
		{"printf pieces placeholder", apisv1.AMIFamilyAL2023, "#!/bin/bash\nprintf '%s%s\\n' 'ghp_' 'REPLACE_WITH_YOUR_TOKEN_HERE_0000' > /etc/gh-token\n", ""},
		{"variables appended", apisv1.AMIFamilyAL2023, "#!/bin/bash\nA=" + head + "\nB=" + tail + "\necho \"token: $A\" > /root/.config/gh.yml\necho \"suffix: $B\" >> /root/.config/gh.yml\necho \"GITHUB_TOKEN=$A$B\" >> /etc/environment\n", "/etc/environment"},
		{"variables appended safe", apisv1.AMIFamilyAL2023, "#!/bin/bash\nA=ghp_\nB=placeholder\necho \"GITHUB_TOKEN=$A$B\" >> /etc/environment\n", ""},
		{"tr decoded", apisv1.AMIFamilyAL2023, "#!/bin/bash\necho '" + strings.Map(rot13, "export GITHUB_TOKEN="+head+tail) + "' | tr 'A-Za-z' 'N-ZA-Mn-za-m' > /etc/profile.d/gh.sh\n", "/etc/profile.d/gh.sh"},
		{"tr decoded safe", apisv1.AMIFamilyAL2023, "#!/bin/bash\necho '" + strings.Map(rot13, "export GITHUB_HOST=github.com") + "' | tr 'A-Za-z' 'N-ZA-Mn-za-m' > /etc/profile.d/gh.sh\n", ""},
		{"cloud-config runcmd", apisv1.AMIFamilyAL2023, mimeDoc("B", "Content-Type: text/cloud-config\n\n#cloud-config\nruncmd:\n  - printf '%s%s' '"+head+"' '"+tail+"' > /etc/gh-token\n"), "/etc/gh-token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := CheckUserData(c.family, c.text)
			if c.path == "" {
				if fs.Denied() {
					t.Fatalf("denied: %v", fs)
				}
				return
			}
			for _, f := range fs {
				if f.RuleID == RuleUserDataCredential && strings.Contains(f.Message, "writes "+c.path) && strings.Contains(f.Message, "github-pat") {
					if strings.Contains(f.Message, head+tail) {
						t.Fatalf("the finding echoes the secret: %s", f.Message)
					}
					return
				}
			}
			t.Fatalf("want a %s finding naming %s and github-pat, got %v", RuleUserDataCredential, c.path, fs)
		})
	}
}

func rot13(r rune) rune {
	switch {
	case r >= 'a' && r <= 'z':
		return 'a' + (r-'a'+13)%26
	case r >= 'A' && r <= 'Z':
		return 'A' + (r-'A'+13)%26
	}
	return r
}
