package lint

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

const tinyDoc = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"

func TestInputBudgetDocuments(t *testing.T) {
	docs := func(n int) io.Reader { return strings.NewReader(strings.Repeat(tinyDoc, n)) }
	if _, skipped, err := DecodeObjects(docs(MaxInputDocuments), "f"); err != nil || len(skipped) != MaxInputDocuments {
		t.Fatalf("control: %d documents: err %v, %d skipped", MaxInputDocuments, err, len(skipped))
	}
	_, skipped, err := DecodeObjects(docs(MaxInputDocuments+1), "f")
	ie, ok := err.(*InputError)
	if !ok || ie.Document != MaxInputDocuments+1 || !strings.Contains(ie.Message, "more than 10000 documents") || len(skipped) != MaxInputDocuments {
		t.Fatalf("%d documents: got %v with %d skipped, want an InputError at document %d naming the bound", MaxInputDocuments+1, err, len(skipped), MaxInputDocuments+1)
	}
	// One budget spans calls: the second input is not read once it is spent.
	b := NewInputBudget()
	if _, _, err := b.DecodeObjects(docs(MaxInputDocuments), "a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.DecodeObjects(docs(1), "b"); err == nil || !b.Spent() {
		t.Fatalf("second input past the shared bound: got %v, want an error", err)
	}
	if _, _, err := b.DecodeObjects(docs(1), "c"); err == nil || !strings.Contains(err.Error(), "c: not read: ") {
		t.Fatalf("input after the bound: got %v, want 'not read'", err)
	}
	// List items count as documents.
	items := strings.Repeat(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},`, MaxInputDocuments)
	list := `{"apiVersion":"v1","kind":"List","items":[` + strings.TrimSuffix(items, ",") + `]}`
	if _, _, err := DecodeObjects(strings.NewReader(list), "l"); err == nil || !strings.Contains(err.Error(), "List items included") {
		t.Fatalf("a List of %d items: got %v, want the documents bound", MaxInputDocuments, err)
	}
}

func TestInputBudgetBytes(t *testing.T) {
	// A budget of the real shape with a small byte bound, so that the test
	// reads megabytes rather than 64 MiB.
	doc := "---\n# " + strings.Repeat("x", 1<<10) + "\n" + tinyDoc
	b := &InputBudget{bytes: 64 << 10, docs: MaxInputDocuments}
	if _, _, err := b.DecodeObjects(strings.NewReader(strings.Repeat(doc, 50)), "f"); err != nil {
		t.Fatalf("control: %d bytes within 64 KiB: %v", 50*len(doc), err)
	}
	b = &InputBudget{bytes: 64 << 10, docs: MaxInputDocuments}
	_, _, err := b.DecodeObjects(strings.NewReader(strings.Repeat(doc, 80)), "f")
	if err == nil || !strings.Contains(err.Error(), "64 MiB) in total") || !b.Spent() {
		t.Fatalf("%d bytes over 64 KiB: got %v, want the bytes bound", 80*len(doc), err)
	}
}

func TestNestedListsAreBounded(t *testing.T) {
	nc := `{"apiVersion":"karpenter.k8s.aws/v1","kind":"EC2NodeClass","metadata":{"name":"a"},"spec":{}}`
	nested := func(depth int) string {
		s := nc
		for range depth {
			s = `{"apiVersion":"v1","kind":"List","items":[` + s + `]}`
		}
		return s
	}
	objs, _, err := DecodeObjects(strings.NewReader(nested(MaxListDepth)), "f")
	if err != nil || len(objs) != 1 {
		t.Fatalf("control: an object in %d nested Lists: %v, %d objects", MaxListDepth, err, len(objs))
	}
	objs, skipped, err := DecodeObjects(strings.NewReader(nested(MaxListDepth+1)), "f")
	if err != nil || len(objs) != 0 || len(skipped) != 1 || !strings.Contains(skipped[0].Reason, fmt.Sprintf("nested in more than %d Lists", MaxListDepth)) {
		t.Fatalf("%d nested Lists: got %v, %v, %v; want one skipped document naming the bound", MaxListDepth+1, err, objs, skipped)
	}
	// The hostile input of issue 31: Lists 4,900 deep (57 s, 6.4 GB before).
	if _, skipped, err := DecodeObjects(strings.NewReader(nested(4900)), "f"); err != nil || len(skipped) != 1 {
		t.Fatalf("4,900 nested Lists: %v, %v", err, skipped)
	}
}
