package clusterinfo

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func svc(ip string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"}, Spec: corev1.ServiceSpec{ClusterIP: ip}}
}

func TestServiceCIDR(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		want    string
		wantErr bool
	}{
		{"ServiceCIDR object", []runtime.Object{
			&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"fd00::/108", "10.96.0.0/12"}}},
			svc("10.96.0.1")}, "10.96.0.0/12", false},
		{"EKS default 10.100", []runtime.Object{svc("10.100.0.1")}, "10.100.0.0/16", false},
		{"EKS default 172.20", []runtime.Object{svc("172.20.0.1")}, "172.20.0.0/16", false},
		{"unknown range", []runtime.Object{svc("10.0.0.1")}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := serviceCIDR(context.Background(), fake.NewClientset(tc.objs...))
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("serviceCIDR = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
