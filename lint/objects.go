package lint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// MaxObjectBytes is the largest document DecodeObjects reads: 7 MiB, the
// karpx webhook's cap on an AdmissionReview (webhook.MaxReviewBytes), which
// is itself above kube-apiserver's 3 MiB request limit for one object.
const MaxObjectBytes = 7 << 20

// MaxInputBytes bounds what one lint or audit run reads from all its
// inputs together (files, directories, standard input): 64 MiB, nine
// documents of MaxObjectBytes, or some 20,000 NodePools as kubectl writes
// them; a cluster's Karpenter manifests are a few hundred kilobytes.
const MaxInputBytes = 64 << 20

// MaxInputDocuments bounds the documents one run reads, List items
// included: 10,000. Each one checked costs about 0.3 ms and tens of
// kilobytes held until the report is printed (100,000 NodePools took 33 s
// and 1.2 GB); 10,000 is far more than any cluster's NodePools and
// EC2NodeClasses.
const MaxInputDocuments = 10000

// MaxListDepth bounds Lists nested in Lists (kind: List whose items are
// Lists): 4. kubectl flattens nested Lists, but no tool writes more than
// one level; reading a List re-encodes its items, so unbounded nesting
// cost time quadratic in the depth (Lists 4,900 deep in 215 KB took 57 s
// and 6.4 GB). A List nested deeper is skipped, with the reason.
const MaxListDepth = 4

// InputBudget is what is left of one run's input bounds (MaxInputBytes,
// MaxInputDocuments): every DecodeObjects call of a run shares one, so the
// bounds hold for the input as a whole, at a cost linear in what was
// read. The zero value is spent; use NewInputBudget.
type InputBudget struct {
	bytes int64
	docs  int
	// spent is the error that ended reading, once a bound was reached.
	spent *InputError
}

// NewInputBudget returns the budget of one run: MaxInputBytes and
// MaxInputDocuments.
func NewInputBudget() *InputBudget {
	return &InputBudget{bytes: MaxInputBytes, docs: MaxInputDocuments}
}

// Spent reports whether a bound was reached: later inputs are not read.
func (b *InputBudget) Spent() bool { return b.spent != nil }

// Object is one NodePool or EC2NodeClass read from a manifest, or an
// object of a Karpenter kind karpx does not serve (unsupportedKinds, none
// today), which has Raw alone and which LintObjects denies (KX203).
type Object struct {
	// Source is where it came from: a file name or "-" for stdin.
	Source string `json:"source"`
	// Document is the 1-based index of the YAML or JSON document in Source.
	Document int `json:"document"`
	// NodePool is set for a karpenter.sh/v1 NodePool that decodes into
	// the Go type; at most one of NodePool and EC2NodeClass is set.
	NodePool *karpv1.NodePool `json:"-"`
	// EC2NodeClass is set for a karpenter.k8s.aws/v1 EC2NodeClass that
	// decodes into the Go type.
	EC2NodeClass *apisv1.EC2NodeClass `json:"-"`
	// Raw is the object as decoded JSON, for schema validation.
	Raw map[string]any `json:"-"`
	// DecodeError is set when Raw does not decode into the Go type (a
	// field of the wrong type); the schema validation names the field.
	DecodeError string `json:"-"`
}

// Kind returns "NodePool" or "EC2NodeClass", else Raw's kind.
func (o Object) Kind() string {
	k, _ := o.Raw["kind"].(string)
	switch {
	case o.NodePool != nil:
		return "NodePool"
	case o.EC2NodeClass != nil:
		return "EC2NodeClass"
	}
	return k
}

// Name returns metadata.name.
func (o Object) Name() string {
	switch {
	case o.NodePool != nil:
		return o.NodePool.Name
	case o.EC2NodeClass != nil:
		return o.EC2NodeClass.Name
	}
	md, _ := o.Raw["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

// Skipped is a document DecodeObjects did not check, and why.
type Skipped struct {
	// Source is the file name or "-".
	Source string `json:"source"`
	// Document is the 1-based document index in Source.
	Document int `json:"document"`
	// APIVersion and Kind are the document's, when it has them.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Name is metadata.name, when present.
	Name string `json:"name,omitempty"`
	// Reason says why it was skipped and, for a likely mistake, the fix.
	Reason string `json:"reason"`
}

// InputError is input that could not be read: the file, the document at
// which reading stopped, and a short printable message.
type InputError struct {
	Source   string `json:"source"`
	Document int    `json:"document,omitempty"`
	Message  string `json:"message"`
}

// Error implements error: "nodepool.yaml: document 3: ...".
func (e *InputError) Error() string {
	if e.Document > 0 {
		return fmt.Sprintf("%s: document %d: %s", e.Source, e.Document, e.Message)
	}
	return e.Source + ": " + e.Message
}

// Object kinds the rules apply to, by apiVersion and kind.
var (
	nodePoolGVK     = [2]string{"karpenter.sh/v1", "NodePool"}
	ec2NodeClassGVK = [2]string{apisv1.SchemeGroupVersion.String(), "EC2NodeClass"}
)

// budgetReader fails a read once more than limit bytes were read since the
// last reset: DecodeObjects resets it after every document, so that one
// document (or endless input without a separator, /dev/zero) cannot grow
// memory beyond about MaxObjectBytes. total is the run's InputBudget, which
// it draws on too.
type budgetReader struct {
	r         io.Reader
	remaining int64
	total     *InputBudget
}

var (
	errTooLarge      = errors.New("document too large")
	errInputTooLarge = errors.New("input too large")
)

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.total.bytes <= 0 {
		return 0, errInputTooLarge
	}
	if b.remaining <= 0 {
		return 0, errTooLarge
	}
	p = p[:min(int64(len(p)), b.remaining, b.total.bytes)]
	n, err := b.r.Read(p)
	b.remaining -= int64(n)
	b.total.bytes -= int64(n)
	return n, err
}

// decodeSlack is what the decoder may read ahead beyond one document
// (its buffer), on top of MaxObjectBytes.
const decodeSlack = 64 << 10

// DecodeObjects reads a stream of YAML or JSON documents exactly as
// kubectl does (k8s.io/apimachinery's YAMLOrJSONDecoder, which kubectl's
// resource builder uses: YAML documents separated by "---", or JSON
// objects back to back), expands "kind: List" documents, and returns the
// NodePools (karpenter.sh/v1) and EC2NodeClasses (karpenter.k8s.aws/v1)
// in order, with every other document in skipped and the reason. Empty
// and null documents are ignored, as kubectl ignores them. A document
// larger than MaxObjectBytes, or one that does not parse, stops the
// stream: the error is an *InputError with a short, printable message,
// returned with what was read before it. It reads within a budget of its
// own (NewInputBudget); InputBudget.DecodeObjects shares one between
// calls.
func DecodeObjects(r io.Reader, source string) (objs []Object, skipped []Skipped, err error) {
	return NewInputBudget().DecodeObjects(r, source)
}

// DecodeObjects is the package's DecodeObjects within b: once the run has
// read MaxInputBytes or MaxInputDocuments (List items included), reading
// stops with an *InputError naming the bound, and every later call returns
// that error at once.
func (b *InputBudget) DecodeObjects(r io.Reader, source string) (objs []Object, skipped []Skipped, err error) {
	if b.spent != nil {
		return nil, nil, &InputError{Source: source, Message: "not read: " + b.spent.Message}
	}
	// The decoder peeks at the stream when it is created (JSON or YAML?),
	// so the budget must be set before.
	br := &budgetReader{r: r, remaining: MaxObjectBytes + decodeSlack, total: b}
	dec := utilyaml.NewYAMLOrJSONDecoder(br, 4096)
	for n := 1; ; n++ {
		br.remaining = MaxObjectBytes + decodeSlack
		var ext runtime.RawExtension
		if err := dec.Decode(&ext); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, skipped, nil
			}
			msg := printable(err.Error())
			switch {
			case errors.Is(err, errTooLarge):
				msg = fmt.Sprintf("larger than %d bytes (7 MiB, the webhook's limit per object); split the input or check that it is a manifest", MaxObjectBytes)
			case errors.Is(err, errInputTooLarge):
				return objs, skipped, b.spend(source, n, fmt.Sprintf("the input is over %d bytes (64 MiB) in total; lint or audit it in parts", MaxInputBytes))
			}
			return objs, skipped, &InputError{Source: source, Document: n, Message: msg}
		}
		raw := bytes.TrimSpace(ext.Raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			n--
			continue
		}
		o, s, ok := b.decodeDocument(raw, source, n, 0)
		objs, skipped = append(objs, o...), append(skipped, s...)
		if !ok {
			return objs, skipped, b.spend(source, n, fmt.Sprintf("the input holds more than %d documents (List items included) in total; lint or audit it in parts", MaxInputDocuments))
		}
	}
}

// spend records that a bound was reached, at document n of source.
func (b *InputBudget) spend(source string, n int, msg string) *InputError {
	b.spent = &InputError{Source: source, Document: n, Message: msg}
	return b.spent
}

// printable makes a parser message safe and short for a terminal: invalid
// UTF-8 and control characters are escaped, and it is cut to 200 bytes.
func printable(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) >= 0 {
		s = strconv.QuoteToASCII(s)
		s = s[1 : len(s)-1]
	}
	return truncate(s, 200)
}

// jsonKind names the JSON type of a non-object document.
func jsonKind(js []byte) string {
	switch js[0] {
	case '"':
		return "a string"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// decodeDocument decodes one document, or one item of a List nested
// listDepth Lists deep; ok is false once the run's MaxInputDocuments are
// used up.
func (b *InputBudget) decodeDocument(js []byte, source string, n, listDepth int) (objs []Object, skipped []Skipped, ok bool) {
	if b.docs--; b.docs < 0 {
		return nil, nil, false
	}
	o, s := b.decodeOne(js, source, n, listDepth)
	return o, s, b.docs >= 0
}

// decodeTyped decodes the JSON document js into a new T (NodePool or
// EC2NodeClass) and returns it; when js does not decode into T it records
// the error, made printable, in o.DecodeError and returns nil.
func decodeTyped[T any](js []byte, o *Object) *T {
	v := new(T)
	if err := json.Unmarshal(js, v); err != nil {
		o.DecodeError = printable(err.Error())
		return nil
	}
	return v
}

func (b *InputBudget) decodeOne(js []byte, source string, n, listDepth int) ([]Object, []Skipped) {
	skip := func(apiVersion, kind, name, reason string) ([]Object, []Skipped) {
		return nil, []Skipped{{Source: source, Document: n, APIVersion: apiVersion, Kind: kind, Name: name, Reason: reason}}
	}
	if js[0] != '{' {
		return skip("", "", "", fmt.Sprintf("is %s, not a Kubernetes object; kubectl rejects it (a manifest is a mapping with apiVersion, kind and metadata)", jsonKind(js)))
	}
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil {
		return skip("", "", "", "does not decode: "+printable(err.Error()))
	}
	apiVersion, _ := raw["apiVersion"].(string)
	kind, _ := raw["kind"].(string)
	md, _ := raw["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	switch {
	case apiVersion == "" && kind == "":
		return skip("", "", name, "has no apiVersion and no kind; kubectl rejects it")
	case apiVersion == "":
		return skip("", kind, name, "has no apiVersion; kubectl rejects it (NodePool is karpenter.sh/v1, EC2NodeClass karpenter.k8s.aws/v1)")
	case kind == "":
		return skip(apiVersion, "", name, "has no kind; kubectl rejects it")
	}
	switch [2]string{apiVersion, kind} {
	case nodePoolGVK:
		o := Object{Source: source, Document: n, Raw: raw}
		o.NodePool = decodeTyped[karpv1.NodePool](js, &o)
		return []Object{o}, nil
	case ec2NodeClassGVK:
		o := Object{Source: source, Document: n, Raw: raw}
		o.EC2NodeClass = decodeTyped[apisv1.EC2NodeClass](js, &o)
		return []Object{o}, nil
	}
	if _, ok := unsupportedKinds[[2]string{apiVersion, kind}]; ok {
		// A Karpenter kind karpx does not serve: LintObjects denies it
		// (KX203) rather than skipping it.
		return []Object{{Source: source, Document: n, Raw: raw}}, nil
	}
	if items, ok := raw["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		if listDepth >= MaxListDepth {
			return skip(apiVersion, kind, name, fmt.Sprintf("a %s nested in more than %d Lists; karpx reads Lists at most %d deep: flatten the input", kind, MaxListDepth, MaxListDepth))
		}
		var objs []Object
		var skipped []Skipped
		for i, item := range items {
			js, err := json.Marshal(item)
			if err != nil || len(js) == 0 {
				continue
			}
			o, s, ok := b.decodeDocument(js, source, n, listDepth+1)
			for j := range s {
				s[j].Reason = fmt.Sprintf("(%s item %d) %s", kind, i+1, s[j].Reason)
			}
			objs, skipped = append(objs, o...), append(skipped, s...)
			if !ok {
				break
			}
		}
		return objs, skipped
	}
	group, version, _ := strings.Cut(apiVersion, "/")
	for _, known := range [][2]string{nodePoolGVK, ec2NodeClassGVK} {
		kg, kv, _ := strings.Cut(known[0], "/")
		switch {
		case strings.EqualFold(kind, known[1]) && group == kg && version == kv:
			return skip(apiVersion, kind, name, fmt.Sprintf("kind %q is not served by %s (kinds are case-sensitive); did you mean %s?", kind, apiVersion, known[1]))
		case kind == known[1] && group == kg:
			return skip(apiVersion, kind, name, fmt.Sprintf("%s is not served by Karpenter v1 (only %s); migrate the manifest to %s", apiVersion, known[0], known[0]))
		case kind == known[1]:
			return skip(apiVersion, kind, name, fmt.Sprintf("apiVersion %q is not %s's; use %s", apiVersion, kind, known[0]))
		}
	}
	return skip(apiVersion, kind, name, "not a NodePool or EC2NodeClass; karpx lint checks only those")
}

// ObjectFinding is a Finding with the object's source.
type ObjectFinding struct {
	Finding
	// Source is the file the object came from ("-" for stdin).
	Source string `json:"source"`
	// Document is the 1-based YAML document index in Source.
	Document int `json:"document"`
}

// SchemaValidator validates an object against its CRD as the API server
// does, returning for each error its field path and the API server's text
// after the path, so that "path: text" is the API server's message
// (package lint/crdschema implements it over manifests/crds).
type SchemaValidator interface {
	ValidateObject(ctx context.Context, obj map[string]any) (fields, messages []string)
}

// LintObjects runs every rule on objs, offline: nodeClassRef (KX101) is
// checked against the EC2NodeClasses among objs, each object's fields
// against the deny list of fields karpx does not implement yet
// (CheckUnsupported, KX2xx), and, when schema is not nil, each object
// against its CRD (KX011). Findings whose rule ID is in
// disabled are dropped. The result is in object order, each object's
// findings sorted.
func LintObjects(ctx context.Context, objs []Object, disabled map[string]bool, schema SchemaValidator) []ObjectFinding {
	classes := map[string]bool{}
	for _, o := range objs {
		if o.Kind() == "EC2NodeClass" {
			classes[o.Name()] = true
		}
	}
	lookup := func(_ context.Context, name string) (bool, error) { return classes[name], nil }
	var out []ObjectFinding
	for _, o := range objs {
		var fs Findings
		if schema != nil && o.Raw != nil {
			fields, msgs := schema.ValidateObject(ctx, o.Raw)
			for i, msg := range msgs {
				fs = append(fs, Finding{RuleID: RuleCRDSchema, Severity: severityOf(RuleCRDSchema), Field: fields[i], Message: msg,
					Fix: "correct the field as the message says; the API server rejects the object as written"})
			}
		}
		if o.Raw != nil {
			fs = append(fs, CheckUnsupported(o.Raw)...)
		}
		switch {
		case o.NodePool != nil:
			fs = append(fs, CheckNodePool(ctx, o.NodePool, lookup)...)
		case o.EC2NodeClass != nil:
			fs = append(fs, CheckEC2NodeClass(o.EC2NodeClass)...)
		case o.DecodeError != "" && len(fs) == 0:
			fs = append(fs, Finding{RuleID: RuleCRDSchema, Severity: severityOf(RuleCRDSchema), Message: "does not decode: " + o.DecodeError,
				Fix: "give every field the type the CRD declares"})
		}
		for i := range fs {
			fs[i].Kind, fs[i].Name = o.Kind(), o.Name()
		}
		fs = fs.Without(disabled)
		fs.Sort()
		for _, f := range fs {
			out = append(out, ObjectFinding{Finding: f, Source: o.Source, Document: o.Document})
		}
	}
	return out
}
