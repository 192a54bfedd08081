// Package throttle implements `kubectl karpx throttle`: the state of the
// karpx controller's client-side EC2 API budget (token buckets per
// throttling category and action, requests, throttled answers, SDK
// retries, client-side waits).
//
// The command reads the controller's budget status, the JSON served at
// /throttle on its plain-HTTP status port (Service port "status", apart
// from the authenticated metrics port), through the API server's service proxy
// (GET /api/v1/namespaces/{namespace}/services/{service}:{port}/proxy/throttle)
// with kubectl's credentials, so it needs no port-forward: only RBAC "get"
// on "services/proxy" in the controller's namespace. With --endpoint it
// reads a URL directly instead (a controller run locally).
//
// The default output is a table per throttling category; -o wide adds a
// table per action; -o json and -o yaml print the status as served, as a
// karpx.io/v1alpha1 EC2APIBudget (apiVersion and kind added).
package throttle
