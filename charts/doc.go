// Package charts holds karpx's Helm charts (karpx: controller, webhook,
// RBAC, webhook configurations; karpx-crd: the CustomResourceDefinitions)
// and renders them offline with Helm's Go SDK, as `helm template` does,
// for the tests (test/helm) and for `make manifests`, which writes
// manifests/ from the karpx chart.
package charts
