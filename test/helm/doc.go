// Package helm tests the Helm charts under charts/ offline with Helm's Go
// SDK (helm.sh/helm/v3, pinned in go.mod): both charts pass `helm lint
// --strict`, the karpx chart renders with its defaults, its
// values.schema.json rejects unknown and mistyped values naming them, and
// manifests/ (what `kubectl apply -k` deploys) holds exactly the objects
// the chart renders with hack/chartmanifests/values.yaml. `make chart-lint`
// runs it; `make test` too.
package helm
