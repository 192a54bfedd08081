//go:build tools

// Package karpenteraws only records the command `make karpenter-aws` builds:
// the real Karpenter AWS provider's controller, at the version go.mod pins.
// It holds no code of its own.
package karpenteraws

import (
	_ "github.com/aws/karpenter-provider-aws/cmd/controller"
)
