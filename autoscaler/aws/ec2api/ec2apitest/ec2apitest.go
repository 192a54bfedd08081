// Package ec2apitest starts the EC2 simulator on loopback for a test and
// returns the real SDK-backed ec2api.Client talking to it, so every
// provider's tests exercise the same wire protocol, retryer and retry quota
// as production.
package ec2apitest

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/ec2sim"
)

// Env is a running simulator and a client of it.
type Env struct {
	// Sim is the simulator; its Counts, Stats and Faults drive assertions.
	Sim *ec2sim.Simulator
	// Client is the real SDK client with static test credentials.
	Client *ec2api.Client
	// Endpoint is the simulator's base URL.
	Endpoint string
}

// Start starts a simulator with cfg on 127.0.0.1, stopped when t ends, and
// a client of it configured by client (see NewClient). It fails t when
// either cannot start.
func Start(t testing.TB, cfg ec2sim.Config, client ec2api.Config) *Env {
	t.Helper()
	sim, err := ec2sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	endpoint, err := sim.Start(ctx, "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-sim.Stopped() })
	e := &Env{Sim: sim, Endpoint: endpoint}
	e.Client = e.NewClient(t, client)
	return e
}

// NewClient returns another client of e's simulator configured by client,
// with the simulator as BaseEndpoint, us-east-1 and static credentials
// unless client sets them (for example one with a budget.Limiter in
// client.APIOptions). It fails t when the client cannot be built.
func (e *Env) NewClient(t testing.TB, client ec2api.Config) *ec2api.Client {
	t.Helper()
	if client.Region == "" {
		client.Region = "us-east-1"
	}
	client.BaseEndpoint = e.Endpoint
	if client.Credentials == nil {
		client.Credentials = credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")
	}
	c, err := ec2api.New(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// LoopbackHTTP is an HTTP client that avoids the smithy-go/net/http body
// race seen only against a loopback server that answers in microseconds
// (see ec2sim.WrapTransport); production clients do not need it.
var LoopbackHTTP = &http.Client{Transport: ec2sim.WrapTransport(nil)}

// Loopback is a per-call EC2 option that sets LoopbackHTTP.
func Loopback(o *ec2.Options) { o.HTTPClient = LoopbackHTTP }
