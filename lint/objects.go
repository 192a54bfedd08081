package lint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// Object is one NodePool or EC2NodeClass read from a manifest.
type Object struct {
	// Source is where it came from: a file name or "-" for stdin.
	Source string `json:"source"`
	// Document is the 1-based index of the YAML document in Source.
	Document int `json:"document"`
	// NodePool is set for a karpenter.sh/v1 NodePool; exactly one of
	// NodePool and EC2NodeClass is set.
	NodePool *karpv1.NodePool `json:"-"`
	// EC2NodeClass is set for a karpenter.k8s.aws/v1 EC2NodeClass.
	EC2NodeClass *apisv1.EC2NodeClass `json:"-"`
}

// Kind returns "NodePool" or "EC2NodeClass".
func (o Object) Kind() string {
	if o.NodePool != nil {
		return "NodePool"
	}
	return "EC2NodeClass"
}

// Name returns metadata.name.
func (o Object) Name() string {
	if o.NodePool != nil {
		return o.NodePool.Name
	}
	return o.EC2NodeClass.Name
}

// Object kinds the rules apply to, by apiVersion and kind.
var (
	nodePoolGVK     = [2]string{"karpenter.sh/v1", "NodePool"}
	ec2NodeClassGVK = [2]string{apisv1.SchemeGroupVersion.String(), "EC2NodeClass"}
)

// DecodeObjects reads a stream of YAML or JSON documents (separated by
// "---") and returns the NodePools (karpenter.sh/v1) and EC2NodeClasses
// (karpenter.k8s.aws/v1) in it, in order; other kinds are skipped, and a
// "kind: List" document is expanded. source labels the objects. An error
// names the document that does not decode.
func DecodeObjects(r io.Reader, source string) ([]Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []Object
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, n, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			n--
			continue
		}
		objs, err := decodeDocument(doc, source, n)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
}

func decodeDocument(doc []byte, source string, n int) ([]Object, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: document %d: %w", source, n, err)
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil
	}
	var tm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil, fmt.Errorf("%s: document %d: not a Kubernetes object: %w", source, n, err)
	}
	switch [2]string{tm.APIVersion, tm.Kind} {
	case nodePoolGVK:
		np := &karpv1.NodePool{}
		if err := json.Unmarshal(js, np); err != nil {
			return nil, fmt.Errorf("%s: document %d: NodePool: %w", source, n, err)
		}
		return []Object{{Source: source, Document: n, NodePool: np}}, nil
	case ec2NodeClassGVK:
		nc := &apisv1.EC2NodeClass{}
		if err := json.Unmarshal(js, nc); err != nil {
			return nil, fmt.Errorf("%s: document %d: EC2NodeClass: %w", source, n, err)
		}
		return []Object{{Source: source, Document: n, EC2NodeClass: nc}}, nil
	}
	if strings.HasSuffix(tm.Kind, "List") && tm.Items != nil {
		var out []Object
		for _, item := range tm.Items {
			objs, err := decodeDocument(item, source, n)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
		return out, nil
	}
	return nil, nil
}

// ObjectFinding is a Finding with the object's source.
type ObjectFinding struct {
	Finding
	// Source is the file the object came from ("-" for stdin).
	Source string `json:"source"`
	// Document is the 1-based YAML document index in Source.
	Document int `json:"document"`
}

// LintObjects runs every rule on objs, offline: nodeClassRef (KX101) is
// checked against the EC2NodeClasses among objs. Findings whose rule ID is
// in disabled are dropped. The result is in object order, each object's
// findings sorted.
func LintObjects(ctx context.Context, objs []Object, disabled map[string]bool) []ObjectFinding {
	classes := map[string]bool{}
	for _, o := range objs {
		if o.EC2NodeClass != nil {
			classes[o.EC2NodeClass.Name] = true
		}
	}
	lookup := func(_ context.Context, name string) (bool, error) { return classes[name], nil }
	var out []ObjectFinding
	for _, o := range objs {
		var fs Findings
		if o.NodePool != nil {
			fs = CheckNodePool(ctx, o.NodePool, lookup)
		} else {
			fs = CheckEC2NodeClass(o.EC2NodeClass)
		}
		fs = fs.Without(disabled)
		fs.Sort()
		for _, f := range fs {
			out = append(out, ObjectFinding{Finding: f, Source: o.Source, Document: o.Document})
		}
	}
	return out
}
