package lint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeObjects fuzzes kubectl karpx lint's input reader (seed corpus
// in testdata/fuzz/FuzzDecodeObjects). For any input it requires: no
// panic; errors are *InputError with a short printable message; documents
// numbered from 1 in order; only NodePools and EC2NodeClasses returned;
// the same result twice; and, differentially, that the objects read, when
// written back as concatenated JSON and as "---"-separated YAML, read back
// as the same objects. Each object is then linted with the CRD schema, which
// must not panic.
func FuzzDecodeObjects(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\n---\n{\"apiVersion\":\"karpenter.k8s.aws/v1\",\"kind\":\"EC2NodeClass\",\"metadata\":{\"name\":\"b\"}}\n"))
	schema := exampleSchema(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, skipped, err := DecodeObjects(bytes.NewReader(data), "in")
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error %T is not *InputError: %v", err, err)
			}
			if !utf8.ValidString(ie.Message) || len(ie.Message) > 200 || strings.ContainsAny(ie.Message, "\x00\x1b\r\n") {
				t.Fatalf("unprintable or long message %q", ie.Message)
			}
		}
		last := 0
		for _, o := range objs {
			if o.Document < 1 || o.Document < last {
				t.Fatalf("document %d after %d", o.Document, last)
			}
			last = o.Document
			if k := o.Kind(); k != "NodePool" && k != "EC2NodeClass" {
				t.Fatalf("returned kind %q", k)
			}
		}
		for _, s := range skipped {
			if s.Document < 1 || s.Reason == "" {
				t.Fatalf("bad skip %+v", s)
			}
		}
		objs2, skipped2, err2 := DecodeObjects(bytes.NewReader(data), "in")
		if len(objs2) != len(objs) || len(skipped2) != len(skipped) || (err == nil) != (err2 == nil) {
			t.Fatalf("second read differs: %d/%d objects, %d/%d skipped, %v/%v", len(objs), len(objs2), len(skipped), len(skipped2), err, err2)
		}
		if len(objs) == 0 {
			return
		}
		var asJSON, asYAML bytes.Buffer
		for i, o := range objs {
			js, err := json.Marshal(o.Raw)
			if err != nil {
				t.Fatal(err)
			}
			asJSON.Write(js)
			if i > 0 {
				asYAML.WriteString("\n---\n")
			}
			asYAML.Write(js)
		}
		for form, buf := range map[string][]byte{"JSON": asJSON.Bytes(), "YAML": asYAML.Bytes()} {
			back, _, err := DecodeObjects(bytes.NewReader(buf), "again")
			if err != nil || len(back) != len(objs) {
				t.Fatalf("%s round trip: %d objects, want %d (%v)", form, len(back), len(objs), err)
			}
			for i := range back {
				if !reflect.DeepEqual(back[i].Raw, objs[i].Raw) {
					t.Fatalf("%s round trip changed object %d:\n%v\n%v", form, i, back[i].Raw, objs[i].Raw)
				}
			}
		}
		_ = LintObjects(context.Background(), objs, nil, schema)
	})
}
