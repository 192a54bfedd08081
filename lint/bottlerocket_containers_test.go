package lint

import (
	"strings"
	"testing"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// TestBottlerocketContainerUserData runs unsafe/safe twins of bootstrap
// and host container user-data: decoded and inspected as a script, or
// refused when it does not decode.
func TestBottlerocketContainerUserData(t *testing.T) {
	br := apisv1.AMIFamilyBottlerocket
	container := func(kind, ud string) string {
		return "[settings.kubernetes]\ncluster-dns-ip = \"10.100.0.10\"\n\n[settings." + kind + ".setup]\nsource = \"public.ecr.aws/org/setup:1\"\nmode = \"once\"\nessential = true\nuser-data = \"" + ud + "\"\n"
	}
	cases := []struct {
		name, unsafe, safe, rule, msg string
	}{
		{"bootstrap container script restarts kubelet",
			container("bootstrap-containers", b64s("#!/bin/bash\nchroot /.bottlerocket/rootfs systemctl restart kubelet\n")),
			container("bootstrap-containers", b64s("#!/bin/bash\nchroot /.bottlerocket/rootfs systemctl status kubelet\n")),
			RuleUserDataNodeRestart, "in settings.bootstrap-containers.setup.user-data, decoded"},
		{"host container user-data with a private key",
			container("host-containers", b64s("{\"key\": \"-----BEGIN OPENSSH PRIVATE KEY----- b3Bl -----END OPENSSH PRIVATE KEY-----\"}")),
			container("host-containers", b64s("{\"ssh\": {\"authorized-keys\": [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops\"]}}")),
			RuleUserDataPrivateKey, "in settings.host-containers.setup.user-data, decoded"},
		{"user-data that is not base64",
			container("bootstrap-containers", "#!/bin/bash not encoded"),
			container("bootstrap-containers", b64s("#!/bin/bash\necho ready\n")),
			RuleUserDataUninspectable, "settings.bootstrap-containers.setup.user-data is not base64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := CheckUserData(br, tc.unsafe)
			ok := false
			for _, f := range fs {
				if f.RuleID == tc.rule && f.Line == 8 && strings.Contains(f.Message, tc.msg) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("unsafe: no %s at line 8 naming %q: %v", tc.rule, tc.msg, fs)
			}
			if fs := CheckUserData(br, tc.safe); len(fs) != 0 {
				t.Errorf("safe twin: %v", fs)
			}
		})
	}
}
