package e2e

import (
	"path/filepath"

	"github.com/karpx/karpx/test/cluster"
)

// controllerUser is the user the autoscaler's ServiceAccount (karpx/karpx
// in manifests/controller) authenticates as.
const controllerUser = "system:serviceaccount:karpx:karpx"

// controllerRBACAllowlist are permissions manifests/controller grants that
// the termination scenario does not exercise, each with why the controller
// still needs it.
var controllerRBACAllowlist = map[cluster.Permission]string{
	{Verb: "delete", Resource: "pods"}:                                                "pods still on a draining node when its NodeClaim's terminationGracePeriod runs out (termination/drain.go)",
	{Verb: "get", Group: "karpenter.sh", Resource: "nodeclaims"}:                      "nodeclaim.lifecycle's finalize reads a NodeClaim from the API server, past the cache, only when the cache has not caught up with a write it depends on (nodeclaim/lifecycle); a run where the cache keeps up never needs it",
	{Verb: "get", Resource: "nodes"}:                                                  "disruption re-reads a Node, past the cache, only when releasing its karpenter.sh/disrupted taint conflicted with another write to the Node (disruption.releaseTaint); a run where no Node changes between the cache's copy and that write never needs it",
	{Verb: "get", Resource: "services"}:                                               "default/kubernetes: the service CIDR on clusters without the ServiceCIDR API, before Kubernetes 1.33 (providers/clusterinfo)",
	{Verb: "list", Resource: "persistentvolumes"}:                                     "volume topology: the informer starts with the first pod that has a PersistentVolumeClaim",
	{Verb: "watch", Resource: "persistentvolumes"}:                                    "volume topology: the informer starts with the first pod that has a PersistentVolumeClaim",
	{Verb: "list", Resource: "persistentvolumeclaims"}:                                "volume topology: the informer starts with the first pod that has a PersistentVolumeClaim",
	{Verb: "watch", Resource: "persistentvolumeclaims"}:                               "volume topology: the informer starts with the first pod that has a PersistentVolumeClaim",
	{Verb: "list", Group: "storage.k8s.io", Resource: "storageclasses"}:               "volume topology: the informer starts with the first pod that has a PersistentVolumeClaim",
	{Verb: "watch", Group: "storage.k8s.io", Resource: "storageclasses"}:              "volume topology: the informer starts with the first pod that has a PersistentVolumeClaim",
	{Verb: "list", Resource: "namespaces"}:                                            "namespaceSelector: the informer starts with the first pod whose affinity term has a namespaceSelector (clusterstate.NamespaceLabels)",
	{Verb: "watch", Resource: "namespaces"}:                                           "namespaceSelector: the informer starts with the first pod whose affinity term has a namespaceSelector (clusterstate.NamespaceLabels)",
	{Verb: "list", Group: "karpenter.sh", Resource: "nodeoverlays"}:                   "the NodeOverlay controller, only with --feature-gates NodeOverlay=true (autoscaler/nodeoverlay; test/e2e/nodeoverlay_test.go)",
	{Verb: "watch", Group: "karpenter.sh", Resource: "nodeoverlays"}:                  "the NodeOverlay controller, only with --feature-gates NodeOverlay=true (autoscaler/nodeoverlay; test/e2e/nodeoverlay_test.go)",
	{Verb: "patch", Group: "karpenter.sh", Resource: "nodeoverlays/status"}:           "the NodeOverlay controller's ValidationSucceeded condition, only with --feature-gates NodeOverlay=true (autoscaler/nodeoverlay)",
	{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}:        "the metrics server's authentication filter (--metrics-secure, the default) reviews a scrape's bearer token; the termination scenario runs without a metrics server",
	{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}: "the metrics server's authorization filter (--metrics-secure, the default) checks a scraper may get /metrics; the termination scenario runs without a metrics server",
}

// checkControllerRBAC compares what manifests/controller grants the
// autoscaler's ServiceAccount with what the audit log shows it used (the
// env must have been started with envOptions.audit): a grant never used
// and not allowlisted, or a Forbidden answer, fails the test.
func (e *env) checkControllerRBAC() {
	e.t.Helper()
	objs, err := cluster.LoadRBAC(filepath.Join(e.root, "manifests", "controller"))
	if err != nil {
		e.t.Fatal(err)
	}
	used, forbidden, err := cluster.UsedPermissions(e.cluster.AuditLog(), controllerUser)
	if err != nil {
		e.t.Fatal(err)
	}
	granted := cluster.GrantedPermissions(objs, "karpx", "karpx")
	cluster.CheckLeastPrivilege(e.t, "manifests/controller", granted, used, forbidden, controllerRBACAllowlist)
}
