// Package krew holds the krew plugin manifest of kubectl-karpx: the
// template karpx.yaml.tmpl, from which `make krew` writes karpx.yaml with the
// release version and the sha256 of each archive `make dist` built in
// _output/dist. It has no code; its tests check the generated manifest with
// krew's own validator, the archives against it, and run the linux archive's
// binary through the real kubectl against a test control plane.
package krew
