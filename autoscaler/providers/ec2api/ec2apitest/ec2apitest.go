// Package ec2apitest starts the EC2 simulator on loopback for a test and
// returns the real SDK-backed ec2api.Client talking to it, so every
// provider's tests exercise the same wire protocol, retryer and retry quota
// as production.
package ec2apitest

import (
	"context"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/karpx/karpx/autoscaler/providers/ec2api"
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
// a client configured by client with the simulator as BaseEndpoint,
// us-east-1 and static credentials unless client sets them. It fails t
// when either cannot start.
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
	if client.Region == "" {
		client.Region = "us-east-1"
	}
	client.BaseEndpoint = endpoint
	if client.Credentials == nil {
		client.Credentials = credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")
	}
	c, err := ec2api.New(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Sim: sim, Client: c, Endpoint: endpoint}
}

// LoopbackHTTP is an HTTP client that avoids the smithy-go/net/http body
// race seen only against a loopback server that answers in microseconds
// (see ec2sim.WrapTransport); production clients do not need it.
var LoopbackHTTP = &http.Client{Transport: ec2sim.WrapTransport(nil)}

// Loopback is a per-call EC2 option that sets LoopbackHTTP.
func Loopback(o *ec2.Options) { o.HTTPClient = LoopbackHTTP }
