// Package scheduling decides which nodes to launch for pending pods: one
// pure function, Solve, that makes no API calls, reads an Input (pods,
// NodePools with their instance types, existing nodes with their pods,
// DaemonSet pods, volume requirements) and returns a Result (NodeClaim
// plans, placements on existing nodes, and a reason for every pod that
// fits nowhere). It is a four-step pipeline, one file and one small
// function per step: candidates (candidates.go, newPool) keeps, per
// NodePool, the instance types and available offerings that satisfy its
// requirements and template labels, with each type's DaemonSet overhead;
// filter (filter.go, pool.fit) narrows them per pod by taints and
// tolerations, nodeSelector, required node affinity and volume zones,
// cached per set of pod constraints; pack (pack.go, solver.place, with
// topology.go) goes through the pods by decreasing cpu then memory and puts
// each first-fit onto an existing node, else onto an open plan, else onto a
// new plan of the first NodePool (by descending weight, then name) that can
// take it within its limits, honouring its topology constraints; price
// (price.go, plan.finish) orders each plan's types by their cheapest
// compatible available offering (spot before on-demand whenever cheaper),
// keeps at most MaxInstanceTypes of them (never breaking minValues) and
// narrows the NodeClaim requirements (instance type, zone, capacity type)
// to what they allow. NodeClaimPlan.NodeClaim turns a plan into the object
// to create. Requirement matching is package requirements', the one
// implementation karpx has.
//
// Modelled, with Karpenter's semantics: pod requests as the kubelet admits
// them (init and sidecar containers, overhead, one "pods"); startupTaints
// and karpenter.sh/unregistered never block a pod; NodePool requirements
// with In, NotIn, Exists, DoesNotExist, Gt, Gte, Lt, Lte and minValues
// (Strict, or BestEffort relaxation as Input.MinValuesPolicy says); labels instance types do not carry checked against the
// NodePool's labels and requirements; weights; limits (cpu, memory, nodes,
// any resource; absurd ones such as memory: 100Ei are unlimited); existing
// nodes and open plans used before a new node. Topology, on any key a
// node can carry (topology.go, topology_placement.go, topology_keys.go;
// Karpenter v1.14.0 pkg/controllers/provisioning/scheduling/topology*.go):
// topology spread (maxSkew, DoNotSchedule, minDomains, nodeAffinityPolicy,
// nodeTaintsPolicy, matchLabelKeys), required pod affinity and
// anti-affinity (namespaces, namespaceSelector against
// Input.NamespaceLabels, matchLabelKeys, mismatchLabelKeys; anti-affinity
// both ways, against running, nominated and planned pods), host ports,
// volume zones (Input.VolumeRequirements, see package volumetopology),
// DaemonSet overhead per instance type. Zone, capacity type and hostname
// have fixed indexes and bitmask sets; any other key's domains are the
// values the NodePools can produce (instance type labels such as
// karpenter.k8s.aws/instance-family, In requirements, template labels,
// karpenter.sh/nodepool) and existing nodes carry. A plan holding a pod
// whose constraints depend on a key's domain is pinned to one value: an
// offering (zone, capacity type), the instance types carrying one value
// (instance type labels), or "key In (value)" added to its requirements
// (other keys, which the NodeClaim then carries as a label). Preferences
// (preferred pod affinity and
// anti-affinity, the heaviest preferred node affinity term, ScheduleAnyway
// spread) are first required, then relaxed one at a time in Karpenter's
// order until the pod fits. Pods that match another pod's spread selector
// first honour that spread too, so the kube-scheduler accepts the
// spreading pods in any binding order.
//
// Not modelled (Unsupported names them per pod): invalid label selectors,
// dynamic resource claims. Approximated: a
// spread counts matching pods on every node of a domain, where the
// kube-scheduler (nodeAffinityPolicy Honor) counts only those on nodes
// matching the pod's node affinity; hostname spread assumes a new node can
// always be added (minimum 0).
package scheduling
