package lint

import (
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// A script that appends many lines to a file and runs it is followed to
// its end: the sandbox counts the bytes written, not the file's size at
// every write (which refused a 10 KB file written a line at a time as
// past the 1 MiB bound).
func TestManySmallWritesFollowed(t *testing.T) {
	script := func(last string) string {
		return "#!/bin/bash\nfor i in {1..1000}; do echo \"echo $i\" >> /usr/local/bin/steps.sh; done\n" +
			"for i in {1..300}; do echo \"# padding line $i\"; done > /var/log/pad\n" +
			"echo '" + last + "' >> /usr/local/bin/steps.sh\nbash /usr/local/bin/steps.sh\n"
	}
	fs := CheckUserData(apisv1.AMIFamilyAL2023, script("reboot"))
	if !hasRule(fs.Denials(), RuleUserDataNodeRestart) {
		t.Fatalf("want the reboot the written script runs, got %v", fs)
	}
	if fs := CheckUserData(apisv1.AMIFamilyAL2023, script("hostname")); fs.Denied() {
		t.Fatalf("safe twin denied: %v", fs)
	}
}
