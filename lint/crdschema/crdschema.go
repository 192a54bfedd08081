package crdschema

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/karpx/karpx/manifests/crds"
)

// Validator checks objects against a set of CRDs. It is safe for
// concurrent use.
type Validator struct {
	versions map[schema.GroupVersionKind]*crdVersion
}

type crdVersion struct {
	namespaced bool
	structural *structuralschema.Structural
	schema     validation.SchemaValidator
	cel        *cel.Validator
}

// New compiles the schema of every served version of crds. It returns an
// error naming the CRD and version whose schema is not structural or does
// not compile.
func New(crds ...*apiextensionsv1.CustomResourceDefinition) (*Validator, error) {
	v := &Validator{versions: map[schema.GroupVersionKind]*crdVersion{}}
	for _, crd := range crds {
		for i := range crd.Spec.Versions {
			ver := &crd.Spec.Versions[i]
			if !ver.Served || ver.Schema == nil {
				continue
			}
			name := fmt.Sprintf("CRD %s version %s", crd.Name, ver.Name)
			internal := &apiextensions.CustomResourceValidation{}
			if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(ver.Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			ss, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("%s: schema is not structural: %w", name, err)
			}
			sv, _, err := validation.NewSchemaValidator(internal.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}
			v.versions[gvk] = &crdVersion{namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped, structural: ss, schema: sv, cel: cel.NewValidator(ss, true, celconfig.PerCallLimit)}
		}
	}
	return v, nil
}

// Knows reports whether gvk is served by one of the CRDs.
func (v *Validator) Knows(gvk schema.GroupVersionKind) bool {
	_, ok := v.versions[gvk]
	return ok
}

// Validate checks obj (a decoded JSON object with apiVersion and kind) as
// kube-apiserver does on create. unknown lists the paths of fields the
// schema does not declare ("spec.foo"), which the API server rejects under
// strict field validation (kubectl's default) as `unknown field
// "spec.foo"`; errs are the schema and CEL errors in the API server's
// words ("spec: Invalid value: \"object\": must specify ..."). obj is not
// modified. Both are nil for a kind the CRDs do not serve (check Knows).
func (v *Validator) Validate(ctx context.Context, obj map[string]any) (unknown []string, errs field.ErrorList) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, nil
	}
	cv, ok := v.versions[gv.WithKind(kind)]
	if !ok {
		return nil, nil
	}
	// Decode as the API server does (integers as int64, not float64), on
	// a copy.
	js, err := json.Marshal(obj)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(nil, nil, err.Error())}
	}
	u := map[string]any{}
	if err := utiljson.Unmarshal(js, &u); err != nil {
		return nil, field.ErrorList{field.Invalid(nil, nil, err.Error())}
	}
	unknown = pruning.PruneWithOptions(u, cv.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	structuraldefaulting.Default(u, cv.structural)
	un := &unstructured.Unstructured{Object: u}
	// kubectl sends the namespace of the request: none for a cluster-scoped
	// kind, "default" when a namespaced object names none.
	switch {
	case !cv.namespaced:
		un.SetNamespace("")
	case un.GetNamespace() == "":
		un.SetNamespace(metav1.NamespaceDefault)
	}
	// The checks of kube-apiserver's customResourceStrategy.Validate, in
	// its order (k8s.io/apiextensions-apiserver pkg/registry/customresource).
	errs = append(errs, apivalidation.ValidateObjectMetaAccessor(un, cv.namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, validation.ValidateCustomResource(nil, u, cv.schema)...)
	errs = append(errs, schemaobjectmeta.Validate(nil, u, cv.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, cv.structural, u)...)
	if blocked := blockingError(errs); blocked != nil {
		return unknown, append(errs, blocked)
	}
	celErrs, _ := cv.cel.Validate(ctx, nil, cv.structural, u, nil, celconfig.RuntimeCELCostBudget)
	return unknown, append(errs, celErrs...)
}

// blockingError is the API server's rule for skipping CEL validation: after
// an error of these types the object is not well-typed enough for the
// rules, and one error says so.
func blockingError(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}

// ValidateObject is Validate in the form lint.LintObjects takes
// (lint.SchemaValidator): for each error, the field path ("spec.role")
// and the API server's text after it ("Invalid value: ...", or
// `unknown field "spec.foo"` with an empty path).
func (v *Validator) ValidateObject(ctx context.Context, obj map[string]any) (fields, messages []string) {
	unknown, errs := v.Validate(ctx, obj)
	for _, p := range unknown {
		fields, messages = append(fields, ""), append(messages, fmt.Sprintf("unknown field %q", p))
	}
	for _, e := range errs {
		fields, messages = append(fields, e.Field), append(messages, e.ErrorBody())
	}
	return fields, messages
}

// Shipped returns the Validator for the CRDs karpx ships (manifests/crds:
// NodePool, NodeClaim, EC2NodeClass), built on the first call and shared by
// every later one (kubectl karpx lint and audit). It returns the error of
// reading or compiling those CRDs, the same on every call.
var Shipped = sync.OnceValues(func() (*Validator, error) {
	all, err := crds.All()
	if err != nil {
		return nil, err
	}
	return New(all...)
})
