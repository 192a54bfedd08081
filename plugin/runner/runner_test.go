package runner

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/spf13/cobra"
)

type recorder struct {
	calls []string
	fail  string
}

func (r *recorder) step(name string) error {
	r.calls = append(r.calls, name)
	if r.fail == name {
		return errors.New(name + " failed")
	}
	return nil
}

func (r *recorder) Complete(*cobra.Command, []string) error { return r.step("Complete") }
func (r *recorder) Validate() error                         { return r.step("Validate") }
func (r *recorder) Run(context.Context) error               { return r.step("Run") }

func TestRunEOrderAndFirstError(t *testing.T) {
	for _, tc := range []struct {
		fail string
		want []string
	}{
		{"", []string{"Complete", "Validate", "Run"}},
		{"Complete", []string{"Complete"}},
		{"Validate", []string{"Complete", "Validate"}},
		{"Run", []string{"Complete", "Validate", "Run"}},
	} {
		r := &recorder{fail: tc.fail}
		cmd := &cobra.Command{}
		cmd.SetContext(context.Background())
		err := RunE(r)(cmd, nil)
		if !reflect.DeepEqual(r.calls, tc.want) {
			t.Errorf("fail %q: calls %v, want %v", tc.fail, r.calls, tc.want)
		}
		if (tc.fail == "") != (err == nil) {
			t.Errorf("fail %q: error %v", tc.fail, err)
		}
	}
}
