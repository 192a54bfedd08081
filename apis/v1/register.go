package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is the API group of EC2NodeClass, as registered by Karpenter's AWS provider.
const Group = "karpenter.k8s.aws"

var (
	// SchemeGroupVersion is karpenter.k8s.aws/v1.
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

	// SchemeBuilder registers EC2NodeClass and EC2NodeClassList with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion}

	// AddToScheme adds this package's types to a scheme; it never fails for
	// a fresh scheme and returns an error only on a conflicting registration.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&EC2NodeClass{}, &EC2NodeClassList{})
}
