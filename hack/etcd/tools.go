//go:build tools

// Package etcd only records the etcd command built by `make controlplane`.
package etcd

import _ "go.etcd.io/etcd/server/v3"
