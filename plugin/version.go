package plugin

// Version is the version of the kubectl-karpx binary, reported by
// `kubectl karpx version`. Release builds set it with
//
//	go build -ldflags "-X github.com/karpx/karpx/plugin.Version=v0.1.0" ./cmd/kubectl-karpx
//
// and it is "dev" otherwise. It is a variable, not a constant, only so that
// the linker can set it; nothing assigns it at run time.
var Version = "dev"
