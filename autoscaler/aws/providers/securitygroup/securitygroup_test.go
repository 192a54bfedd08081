package securitygroup

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	v1 "github.com/karpx/karpx/apis/v1"
)

func TestFilters(t *testing.T) {
	fs := Filters(v1.SecurityGroupSelectorTerm{ID: "sg-1", Name: "nodes", Tags: map[string]string{"b": "*", "a": "x"}})
	var got []string
	for _, f := range fs {
		got = append(got, aws.ToString(f.Name)+"="+f.Values[0])
	}
	want := []string{"group-id=sg-1", "group-name=nodes", "tag:a=x", "tag-key=b"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if len(Filters(v1.SecurityGroupSelectorTerm{})) != 0 {
		t.Fatal("empty term must have no filters")
	}
}
