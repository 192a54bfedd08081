package cmd

// Client auth plugins, as kubectl links them: kubeconfigs whose users
// authenticate through an auth provider (OIDC, or the legacy Azure and GCP
// providers, which now point to exec plugins) load in kubectl-karpx too.
// Exec credential plugins (aws eks get-token, gke-gcloud-auth-plugin, …)
// need no import.
import _ "k8s.io/client-go/plugin/pkg/client/auth"
