package cluster

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NotInstalledError reports that the API server does not serve a resource
// karpx reads, which means the CRD defining it is not installed.
type NotInstalledError struct {
	// Resource is the resource that was requested, such as
	// karpenter.sh/v1 nodepools.
	Resource schema.GroupVersionResource
	// Err is the error the client returned: a discovery no-match error or
	// the server's NotFound for the resource's path.
	Err error
}

// Error names the resource type and how to install it, for example
//
//	the server doesn't have a resource type "nodepools" (karpenter.sh/v1): install Karpenter's or karpx's CRDs (manifests/crds)
func (e *NotInstalledError) Error() string {
	return fmt.Sprintf("the server doesn't have a resource type %q (%s): install Karpenter's or karpx's CRDs (manifests/crds)",
		e.Resource.Resource, e.Resource.GroupVersion())
}

// Unwrap returns the client's error.
func (e *NotInstalledError) Unwrap() error { return e.Err }

// IsNotInstalled reports whether err, or an error it wraps, is a
// *NotInstalledError.
func IsNotInstalled(err error) bool {
	var target *NotInstalledError
	return errors.As(err, &target)
}

// ListError interprets err, returned by listing resource, for the user. A
// discovery no-match error or a NotFound from the server (the collection's
// path does not exist) becomes a *NotInstalledError; every other error,
// including the server's Forbidden with its RBAC message, is returned
// unchanged, and nil stays nil.
func ListError(resource schema.GroupVersionResource, err error) error {
	if err == nil {
		return nil
	}
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return &NotInstalledError{Resource: resource, Err: err}
	}
	return err
}
