package clusterinfo

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Info is what Discover found; an empty field was not discovered.
type Info struct {
	// CABundle is the API server's CA, base64-encoded PEM.
	CABundle string
	// KubernetesVersion is the API server's MAJOR.MINOR, e.g. "1.35".
	KubernetesVersion string
	// ServiceCIDR is the service IPv4 CIDR, e.g. "10.100.0.0/16".
	ServiceCIDR string
}

// eksServiceCIDRs are the service CIDRs EKS chooses when none is given.
// Source: Amazon EKS User Guide, "serviceIpv4Cidr" of CreateCluster.
var eksServiceCIDRs = []string{"10.100.0.0/16", "172.20.0.0/16"}

// Discover reads Info through cfg. Each field is discovered on its own;
// the returned error joins the failures (fields that failed stay empty),
// so the caller can fall back field by field.
func Discover(ctx context.Context, cfg *rest.Config) (Info, error) {
	var info Info
	var errs []string
	switch {
	case len(cfg.CAData) > 0:
		info.CABundle = base64.StdEncoding.EncodeToString(cfg.CAData)
	case cfg.CAFile != "":
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			errs = append(errs, fmt.Sprintf("CA bundle: %v", err))
		} else {
			info.CABundle = base64.StdEncoding.EncodeToString(b)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return info, fmt.Errorf("discovering cluster settings: %w", err)
	}
	if v, err := cs.Discovery().ServerVersion(); err != nil {
		errs = append(errs, fmt.Sprintf("Kubernetes version: %v", err))
	} else {
		info.KubernetesVersion = strings.TrimPrefix(v.Major, "v") + "." + strings.TrimSuffix(v.Minor, "+")
	}
	if cidr, err := serviceCIDR(ctx, cs); err != nil {
		errs = append(errs, fmt.Sprintf("service CIDR: %v", err))
	} else {
		info.ServiceCIDR = cidr
	}
	if len(errs) > 0 {
		return info, fmt.Errorf("discovering cluster settings: %s", strings.Join(errs, "; "))
	}
	return info, nil
}

// serviceCIDR returns the first IPv4 CIDR of the "kubernetes" ServiceCIDR,
// else the EKS default CIDR that holds the "kubernetes" Service's IP.
func serviceCIDR(ctx context.Context, cs kubernetes.Interface) (string, error) {
	if sc, err := cs.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
		if cidr := firstIPv4(sc); cidr != "" {
			return cidr, nil
		}
	}
	svc, err := cs.CoreV1().Services(corev1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return "", fmt.Errorf("service default/kubernetes has cluster IP %q: %w", svc.Spec.ClusterIP, err)
	}
	for _, c := range eksServiceCIDRs {
		if netip.MustParsePrefix(c).Contains(ip) {
			return c, nil
		}
	}
	return "", fmt.Errorf("cluster IP %s of service default/kubernetes is in neither EKS default (%s); set --cluster-cidr", ip, strings.Join(eksServiceCIDRs, ", "))
}

func firstIPv4(sc *networkingv1.ServiceCIDR) string {
	for _, c := range sc.Spec.CIDRs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
			return c
		}
	}
	return ""
}
