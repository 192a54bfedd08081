package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// RBACKinds are the kinds LoadRBAC keeps from a manifests directory: what a
// component needs to run under its own ServiceAccount.
var RBACKinds = []string{"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}

// LoadRBAC returns the objects of RBACKinds in the *.yaml files directly in
// dir (manifests/controller, manifests/webhook; subdirectories such as
// kustomize components are not read), typed as core/v1 and rbac/v1
// objects, in file order. It returns an error naming the file for YAML that
// does not parse.
func LoadRBAC(dir string) ([]runtime.Object, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.yaml files in %s", dir)
	}
	var objs []runtime.Object
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			var tm metav1.TypeMeta
			if err := utilyaml.Unmarshal(doc, &tm); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if !slices.Contains(RBACKinds, tm.Kind) {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", file, tm.Kind, err)
			}
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// ApplyRBAC creates, with the admin configuration admin, the Namespaces,
// ServiceAccounts, Roles, ClusterRoles and their bindings found in dir (see
// LoadRBAC), namespaces first; objects that already exist are left as they
// are. It then waits until the API server's authorizer grants what the
// bindings bind (WaitForRBAC). It returns the first error from the API
// server, or WaitForRBAC's.
func ApplyRBAC(ctx context.Context, admin *rest.Config, dir string) error {
	objs, err := LoadRBAC(dir)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	// Namespaces first, including those only named by namespaced objects.
	namespaces := map[string]bool{}
	for _, o := range objs {
		if ns, ok := o.(*corev1.Namespace); ok {
			namespaces[ns.Name] = true
		} else if m, ok := o.(metav1.Object); ok && m.GetNamespace() != "" {
			namespaces[m.GetNamespace()] = true
		}
	}
	for ns := range namespaces {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Namespace %s: %w", ns, err)
		}
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Namespace:
			continue
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		default:
			return fmt.Errorf("unexpected %T from LoadRBAC", o)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			m := o.(metav1.Object)
			return fmt.Errorf("creating %s %s/%s: %w", o.GetObjectKind().GroupVersionKind().Kind, m.GetNamespace(), m.GetName(), err)
		}
	}
	return WaitForRBAC(ctx, cs, objs)
}

// rbacSettleTimeout bounds WaitForRBAC: the API server's RBAC authorizer
// reads Roles and bindings from its informers, a watch event behind the
// write (milliseconds when idle, seconds on a loaded 2-core machine).
const rbacSettleTimeout = 30 * time.Second

// WaitForRBAC waits until the API server authorizes, for every
// ServiceAccount subject of the RoleBindings and ClusterRoleBindings in
// objs, the first resource permission of each rule of the Role or
// ClusterRole it binds (when objs holds that role), as a
// SubjectAccessReview answers it. A process started under a
// ServiceAccount right after its RBAC was created would otherwise see
// Forbidden until the authorizer's informers catch up, which the tests
// count as a permission manifests/ lacks. It returns an error naming the
// ServiceAccount and the permission still refused after 30 s or when ctx
// ends.
func WaitForRBAC(ctx context.Context, cs kubernetes.Interface, objs []runtime.Object) error {
	var reviews []authorizationv1.SubjectAccessReviewSpec
	eachBinding(objs, func(namespace string, subjects []rbacv1.Subject, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			if len(rule.Verbs) == 0 || len(rule.APIGroups) == 0 || len(rule.Resources) == 0 {
				continue // a nonResourceURLs rule
			}
			resource, subresource, _ := strings.Cut(rule.Resources[0], "/")
			attrs := &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: rule.Verbs[0], Group: rule.APIGroups[0],
				Resource: resource, Subresource: subresource}
			if len(rule.ResourceNames) > 0 {
				attrs.Name = rule.ResourceNames[0]
			}
			for _, sub := range subjects {
				if sub.Kind != rbacv1.ServiceAccountKind {
					continue
				}
				reviews = append(reviews, authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: attrs,
					User:   "system:serviceaccount:" + sub.Namespace + ":" + sub.Name,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sub.Namespace, "system:authenticated"}})
			}
		}
	})
	ctx, cancel := context.WithTimeout(ctx, rbacSettleTimeout)
	defer cancel()
	start := time.Now()
	for _, spec := range reviews {
		var last string
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = r.Status.Reason
			return r.Status.Allowed, nil
		})
		if err != nil {
			a := spec.ResourceAttributes
			return fmt.Errorf("RBAC not in effect after %s: %s may not %s %s (group %q) in namespace %q: %s",
				time.Since(start).Round(time.Millisecond), spec.User, a.Verb, strings.TrimSuffix(a.Resource+"/"+a.Subresource, "/"), a.Group, a.Namespace, last)
		}
	}
	return nil
}

// eachBinding calls fn for every RoleBinding and ClusterRoleBinding among
// objs whose Role or ClusterRole objs holds too, with the binding's
// namespace ("" for a ClusterRoleBinding), its subjects and the rules of
// the role it binds (a RoleBinding may bind a ClusterRole: its rules then
// apply in the binding's namespace).
func eachBinding(objs []runtime.Object, fn func(namespace string, subjects []rbacv1.Subject, rules []rbacv1.PolicyRule)) {
	roles := map[string][]rbacv1.PolicyRule{} // "Role/namespace/name" or "ClusterRole//name"
	for _, o := range objs {
		switch r := o.(type) {
		case *rbacv1.Role:
			roles["Role/"+r.Namespace+"/"+r.Name] = r.Rules
		case *rbacv1.ClusterRole:
			roles["ClusterRole//"+r.Name] = r.Rules
		}
	}
	key := func(namespace string, ref rbacv1.RoleRef) string {
		if ref.Kind == "ClusterRole" {
			return "ClusterRole//" + ref.Name
		}
		return ref.Kind + "/" + namespace + "/" + ref.Name
	}
	for _, o := range objs {
		switch b := o.(type) {
		case *rbacv1.RoleBinding:
			if rules, ok := roles[key(b.Namespace, b.RoleRef)]; ok {
				fn(b.Namespace, b.Subjects, rules)
			}
		case *rbacv1.ClusterRoleBinding:
			if rules, ok := roles[key("", b.RoleRef)]; ok {
				fn("", b.Subjects, rules)
			}
		}
	}
}

// WaitForServiceAccountRBAC is WaitForRBAC for what the cluster already
// grants ServiceAccount namespace/name (e.g. the RBAC a Helm chart
// created): every RoleBinding and ClusterRoleBinding naming it, with the
// Role or ClusterRole each binds. It returns the API server's error when
// listing or reading them fails, or WaitForRBAC's.
func WaitForServiceAccountRBAC(ctx context.Context, admin *rest.Config, namespace, name string) error {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	return waitForServiceAccountRBAC(ctx, cs, namespace, name)
}

func waitForServiceAccountRBAC(ctx context.Context, cs kubernetes.Interface, namespace, name string) error {
	names := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == namespace && s.Name == name
		})
	}
	var objs []runtime.Object
	role := func(bindingNamespace string, ref rbacv1.RoleRef) error {
		if ref.Kind == "ClusterRole" {
			r, err := cs.RbacV1().ClusterRoles().Get(ctx, ref.Name, metav1.GetOptions{})
			if err == nil {
				objs = append(objs, r)
			}
			return err
		}
		r, err := cs.RbacV1().Roles(bindingNamespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err == nil {
			objs = append(objs, r)
		}
		return err
	}
	crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing ClusterRoleBindings: %w", err)
	}
	for i := range crbs.Items {
		if b := &crbs.Items[i]; names(b.Subjects) {
			if err := role("", b.RoleRef); err != nil {
				return fmt.Errorf("ClusterRoleBinding %s: %w", b.Name, err)
			}
			objs = append(objs, b)
		}
	}
	rbs, err := cs.RbacV1().RoleBindings(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing RoleBindings: %w", err)
	}
	for i := range rbs.Items {
		if b := &rbs.Items[i]; names(b.Subjects) {
			if err := role(b.Namespace, b.RoleRef); err != nil {
				return fmt.Errorf("RoleBinding %s/%s: %w", b.Namespace, b.Name, err)
			}
			objs = append(objs, b)
		}
	}
	return WaitForRBAC(ctx, cs, objs)
}

// ServiceAccountConfig returns a client configuration for the
// ServiceAccount namespace/name: admin's server, CA and rate limits (QPS,
// Burst) with a bearer token from the TokenRequest API valid for ttl
// (seconds granularity; the API server's minimum is 10 minutes), and no
// client certificate. Requests made with it are authorized by RBAC as
// system:serviceaccount:NAMESPACE:NAME.
func ServiceAccountConfig(ctx context.Context, admin *rest.Config, namespace, name string, ttl time.Duration) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	secs := int64(ttl / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst = admin.QPS, admin.Burst
	return cfg, nil
}

// ServiceAccountForTest applies the RBAC in dir (ApplyRBAC) and returns a
// configuration for ServiceAccount namespace/name (ServiceAccountConfig,
// valid for an hour), failing t on any error.
func ServiceAccountForTest(t testing.TB, admin *rest.Config, dir, namespace, name string) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ApplyRBAC(ctx, admin, dir); err != nil {
		t.Fatalf("applying RBAC from %s: %v", dir, err)
	}
	cfg, err := ServiceAccountConfig(ctx, admin, namespace, name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// WriteKubeconfig writes cfg (server, CA, bearer token or client
// certificate) to path as a kubeconfig with one context, for binaries run
// with --kubeconfig.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["karpx"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	const user = "karpx"
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile}
	kc.Contexts["karpx"] = &clientcmdapi.Context{Cluster: "karpx", AuthInfo: user}
	kc.CurrentContext = "karpx"
	return clientcmd.WriteToFile(*kc, path)
}

// FailOnForbidden returns log with every error it logs also checked: an
// API server Forbidden error (a permission the component's RBAC lacks)
// fails t, naming the request. Controllers log reconcile errors rather
// than stop, so without this a missing permission would only slow a test
// down.
func FailOnForbidden(t testing.TB, log logr.Logger) logr.Logger {
	return FailOnForbiddenUnless(t, log, nil)
}

// FailOnForbiddenUnless is FailOnForbidden, except while excused (may be
// nil) returns true: a kube-apiserver that has just restarted refuses
// requests until its RBAC informers have synced, which is the server's
// state, not a missing permission.
func FailOnForbiddenUnless(t testing.TB, log logr.Logger, excused func() bool) logr.Logger {
	return logr.New(&forbiddenSink{LogSink: log.GetSink(), t: t, excused: excused})
}

type forbiddenSink struct {
	logr.LogSink
	t       testing.TB
	excused func() bool
}

func (s *forbiddenSink) Error(err error, msg string, kv ...any) {
	if err != nil && (apierrors.IsForbidden(err) || strings.Contains(err.Error(), " is forbidden: ")) && (s.excused == nil || !s.excused()) {
		s.t.Errorf("RBAC: %s: %v (add the permission to manifests/)", msg, err)
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s *forbiddenSink) WithValues(kv ...any) logr.LogSink {
	return &forbiddenSink{LogSink: s.LogSink.WithValues(kv...), t: s.t, excused: s.excused}
}

func (s *forbiddenSink) WithName(name string) logr.LogSink {
	return &forbiddenSink{LogSink: s.LogSink.WithName(name), t: s.t, excused: s.excused}
}
