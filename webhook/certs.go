package webhook

import (
	"fmt"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Certificate management modes.
const (
	// CertModeSelf makes the webhook generate and rotate its own CA and
	// serving certificate (github.com/open-policy-agent/cert-controller),
	// store them in a Secret, and inject the CA into the webhook
	// configurations' caBundle. No manual step and no extra component.
	CertModeSelf = "self"
	// CertModeCertManager serves whatever is mounted in the certificate
	// directory; cert-manager issues it from a Certificate and its CA
	// injector fills caBundle (manifests/webhook/cert-manager).
	CertModeCertManager = "cert-manager"
)

// Defaults for self-managed certificates. The rotator renews the serving
// certificate LookaheadInterval before it expires and checks every
// RotationCheckFrequency.
const (
	CACertValidity         = 10 * 365 * 24 * time.Hour
	ServerCertValidity     = 365 * 24 * time.Hour
	CertLookahead          = 90 * 24 * time.Hour
	RotationCheckFrequency = 12 * time.Hour
)

// CertOptions configure self-managed certificates.
type CertOptions struct {
	// Secret holds the CA and serving certificate; it must be mounted at
	// CertDir in every replica, so that all replicas serve the same pair.
	Secret types.NamespacedName
	// CertDir is where the webhook server reads tls.crt and tls.key.
	CertDir string
	// ServiceName is the webhook Service; the certificate is valid for
	// ServiceName.Namespace.svc (and .svc.cluster.local).
	ServiceName string
	// MutatingWebhookConfiguration names the mutating configuration whose
	// caBundle the rotator keeps up to date; empty for none.
	MutatingWebhookConfiguration string
	// ValidatingWebhookConfiguration is the same for the validating one.
	ValidatingWebhookConfiguration string
	// ExtraDNSNames are further DNS names the serving certificate is valid
	// for, e.g. "localhost" for a webhook configuration that reaches the
	// server by URL (tests); nil for the Service names only.
	ExtraDNSNames []string
	// ControllerName names the rotator's controller, which must be unique
	// in the process; empty means "cert-rotator-" and the Secret's name.
	ControllerName string
}

// AddCertRotator adds cert-controller's rotator to mgr. ready is closed when
// the certificate files in CertDir are valid; start the webhook server only
// then. Every replica runs the rotator (no leader election): writes to the
// Secret use optimistic concurrency, so one replica's certificate wins and
// the others pick it up from the Secret.
func AddCertRotator(mgr manager.Manager, o CertOptions, ready chan struct{}) error {
	if o.Secret.Namespace == "" || o.Secret.Name == "" || o.ServiceName == "" {
		return fmt.Errorf("self-managed certificates need a Secret namespace/name and a Service name")
	}
	dns := fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Secret.Namespace)
	if o.ControllerName == "" {
		o.ControllerName = "cert-rotator-" + o.Secret.Name
	}
	var hooks []rotator.WebhookInfo
	if o.MutatingWebhookConfiguration != "" {
		hooks = append(hooks, rotator.WebhookInfo{Name: o.MutatingWebhookConfiguration, Type: rotator.Mutating})
	}
	if o.ValidatingWebhookConfiguration != "" {
		hooks = append(hooks, rotator.WebhookInfo{Name: o.ValidatingWebhookConfiguration, Type: rotator.Validating})
	}
	return rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:              o.Secret,
		ControllerName:         o.ControllerName,
		CertDir:                o.CertDir,
		CAName:                 "karpx-webhook-ca",
		CAOrganization:         "karpx",
		DNSName:                dns,
		ExtraDNSNames:          append([]string{dns + ".cluster.local", o.ServiceName + "." + o.Secret.Namespace}, o.ExtraDNSNames...),
		IsReady:                ready,
		Webhooks:               hooks,
		RequireLeaderElection:  false,
		CaCertDuration:         CACertValidity,
		ServerCertDuration:     ServerCertValidity,
		LookaheadInterval:      CertLookahead,
		RotationCheckFrequency: RotationCheckFrequency,
		EnableReadinessCheck:   true,
	})
}
