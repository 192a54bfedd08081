package cluster

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
)

func TestNewSchemeKnowsKarpenterKinds(t *testing.T) {
	s := NewScheme()
	for _, tc := range []struct {
		obj  runtime.Object
		want schema.GroupVersionKind
	}{
		{&karpv1.NodePool{}, KarpenterV1.WithKind("NodePool")},
		{&karpv1.NodeClaimList{}, KarpenterV1.WithKind("NodeClaimList")},
		{&karpxv1.EC2NodeClass{}, karpxv1.SchemeGroupVersion.WithKind("EC2NodeClass")},
	} {
		gvks, _, err := s.ObjectKinds(tc.obj)
		if err != nil || len(gvks) != 1 || gvks[0] != tc.want {
			t.Errorf("ObjectKinds(%T) = %v, %v; want %v", tc.obj, gvks, err, tc.want)
		}
	}
	if NewScheme() == s {
		t.Error("NewScheme returned a shared scheme")
	}
}

func TestListError(t *testing.T) {
	noMatch := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "karpenter.sh", Kind: "NodeClaim"}}
	forbidden := apierrors.NewForbidden(NodeClaimsResource.GroupResource(), "", errors.New("denied"))
	for _, tc := range []struct {
		in           error
		notInstalled bool
	}{
		{noMatch, true},
		{fmt.Errorf("listing: %w", noMatch), true},
		{apierrors.NewNotFound(schema.GroupResource{}, ""), true},
		{forbidden, false},
		{errors.New("connection refused"), false},
	} {
		err := ListError(NodeClaimsResource, tc.in)
		if IsNotInstalled(err) != tc.notInstalled {
			t.Errorf("ListError(%v) = %v; IsNotInstalled = %v, want %v", tc.in, err, !tc.notInstalled, tc.notInstalled)
		}
		if !tc.notInstalled && err != tc.in {
			t.Errorf("ListError(%v) = %v, want it unchanged", tc.in, err)
		}
		if tc.notInstalled {
			want := `the server doesn't have a resource type "nodeclaims" (karpenter.sh/v1): install Karpenter's or karpx's CRDs (manifests/crds)`
			if err.Error() != want {
				t.Errorf("message = %q, want %q", err, want)
			}
			if !errors.Is(err, tc.in) {
				t.Errorf("%v does not wrap %v", err, tc.in)
			}
		}
	}
	if ListError(NodePoolsResource, nil) != nil {
		t.Error("ListError(nil) != nil")
	}
}

func TestStaticFactoryNilClients(t *testing.T) {
	f := &StaticFactory{}
	if _, err := f.Client(); err == nil {
		t.Error("Client() without a client: no error")
	}
	if _, err := f.Discovery(); err == nil {
		t.Error("Discovery() without a client: no error")
	}
	if first, second := f.Scheme(), f.Scheme(); first == nil || first != second {
		t.Error("Scheme() is not a stable non-nil scheme")
	}
}
