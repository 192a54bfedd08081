package selector

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// fakePages serves pages in order, then err (if set) on the next call.
type fakePages struct {
	pages [][]string
	err   error
}

func (p *fakePages) HasMorePages() bool { return len(p.pages) > 0 || p.err != nil }

func (p *fakePages) NextPage(context.Context, ...func(*ec2.Options)) ([]string, error) {
	if len(p.pages) == 0 {
		err := p.err
		p.err = nil
		return nil, err
	}
	page := p.pages[0]
	p.pages = p.pages[1:]
	return page, nil
}

func newResolver(calls *int, pages map[string][][]string, err error) *Resolver[string, []string, string] {
	return New(0, func(s string) string { return s }, func(a, b string) bool { return a < b },
		Describe[string, []string, string]{
			What: "things",
			Filters: func(term string) []ec2types.Filter {
				if term == "" {
					return nil
				}
				return []ec2types.Filter{{Name: &term}}
			},
			Pages: func(f []ec2types.Filter) Pages[[]string] {
				*calls++
				return &fakePages{pages: pages[*f[0].Name], err: err}
			},
			Items: func(page []string) []string { return page },
		})
}

func TestListUnionsEveryPageOfEveryTerm(t *testing.T) {
	calls := 0
	r := newResolver(&calls, map[string][][]string{"a": {{"x", "z"}, {"y"}}, "b": {{"y", "w"}}}, nil)
	got, err := r.List(context.Background(), []string{"a", "", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "w,x,y,z" {
		t.Errorf("List = %v, want the sorted union w,x,y,z", got)
	}
	if calls != 2 {
		t.Errorf("Describe calls = %d, want 2 (none for the empty term)", calls)
	}
}

func TestListWrapsDescribeErrors(t *testing.T) {
	calls := 0
	boom := errors.New("RequestLimitExceeded")
	r := newResolver(&calls, map[string][][]string{"a": {{"x"}}}, boom)
	_, err := r.List(context.Background(), []string{"a"})
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "describing things: ") {
		t.Errorf("List error = %v, want %v wrapped as \"describing things: ...\"", err, boom)
	}
}
