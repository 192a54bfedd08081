package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpx/karpx/catalog"
)

// Kubelet emulation: once an instance has been running for its boot delay,
// register a Node the way kubelet (with the flags Karpenter's bootstrap
// user data passes) and the AWS cloud provider would; delete it when the
// instance shuts down.

// Annotations and labels the emulated kubelet sets.
const (
	// KwokNodeAnnotation marks Nodes a kwok controller started with
	// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
	// keeps Ready and runs pods on.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// KwokStatusAnnotation, with the value KwokStatusCustom, marks Nodes
	// whose status kwok must leave alone: a kwok controller started with
	// --disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom
	// (kwok's documented convention) skips them, also when it manages
	// every Node (--manage-all-nodes, kwokctl's binary runtime). The
	// simulator sets it, and removes KwokNodeAnnotation, while it plays a
	// kubelet that is not ready, since kwok's node-initialize stage would
	// otherwise turn Ready back to True within milliseconds; it removes it
	// when it hands the Node back.
	KwokStatusAnnotation = "kwok.x-k8s.io/status"
	// KwokStatusCustom is KwokStatusAnnotation's value.
	KwokStatusCustom = "custom"
	// InstanceIDAnnotation records the EC2 instance behind a Node.
	InstanceIDAnnotation = "karpx.sim/instance-id"

	labelZoneID             = "topology.k8s.aws/zone-id"
	annotationProvidedIP    = "alpha.kubernetes.io/provided-node-ip"
	containerRuntimeVersion = "containerd://2.1.4"
)

// nodeProgress is where an instance is in the kubelet emulation.
type nodeProgress struct {
	name         string // Node name, set once created
	createdAt    time.Time
	ready        bool         // kwok annotation (and Ready, with MarkReady) applied
	taintRemoved map[int]bool // indexes of Behavior.LateTaints removed
	windowEnded  map[int]bool // indexes of Behavior.NotReadyWindows over
	resourceSet  map[int]bool // indexes of Behavior.LateResources advertised
	deleted      bool
	failures     int // consecutive failed steps, to log sparingly
}

// nodeTask is one kubelet action, decided under the lock and carried out
// without it.
type nodeTask struct {
	kind     string // create | ready | untaint | notready | windowend | resource | delete
	id       string
	node     string
	taintIdx int      // index into LateTaints, NotReadyWindows or LateResources
	in       instance // copy of the instance's fields
}

// Reconcile advances the kubelet emulation once: it creates Nodes for
// instances that finished booting, makes them ready, removes late taints
// and deletes Nodes of shutting-down instances; it also forgets instances
// past Config.TerminatedRetention. Run calls it every
// Config.ReconcileInterval. It returns the first Kubernetes API error; the
// failed steps are retried on the next call.
func (s *Simulator) Reconcile(ctx context.Context) error {
	now := s.clock.Now()
	s.mu.Lock()
	s.gcLocked(now)
	var tasks []nodeTask
	if s.cfg.Kube != nil {
		for _, id := range s.order {
			in := s.instances[id]
			st := in.state(now, &s.cfg)
			np := &in.node
			switch {
			case np.name == "" && st == StateRunning && !in.behavior.NeverJoin && !now.Before(in.runningSince(&s.cfg).Add(s.bootDelay(in))):
				tasks = append(tasks, nodeTask{kind: "create", id: id, in: *in})
			case np.name == "" || np.deleted:
			case st == StateShuttingDown || st == StateTerminated:
				tasks = append(tasks, nodeTask{kind: "delete", id: id, node: np.name})
			default:
				if !np.ready && !now.Before(np.createdAt.Add(in.behavior.NotReadyFor)) {
					tasks = append(tasks, nodeTask{kind: "ready", id: id, node: np.name})
				}
				for i, lt := range in.behavior.LateTaints {
					if !np.taintRemoved[i] && !now.Before(np.createdAt.Add(lt.After)) {
						tasks = append(tasks, nodeTask{kind: "untaint", id: id, node: np.name, taintIdx: i, in: *in})
					}
				}
				for i, w := range in.behavior.NotReadyWindows {
					start := np.createdAt.Add(w.At)
					switch {
					case np.windowEnded[i] || now.Before(start):
					case now.Before(start.Add(w.For)):
						// Checked on every pass: kwok may post one more
						// heartbeat after it lost the Node.
						tasks = append(tasks, nodeTask{kind: "notready", id: id, node: np.name, taintIdx: i})
					default:
						tasks = append(tasks, nodeTask{kind: "windowend", id: id, node: np.name, taintIdx: i})
					}
				}
				for i, r := range in.behavior.LateResources {
					if !np.resourceSet[i] && !now.Before(np.createdAt.Add(r.After)) {
						tasks = append(tasks, nodeTask{kind: "resource", id: id, node: np.name, taintIdx: i, in: *in})
					}
				}
			}
		}
	}
	s.mu.Unlock()

	errs := s.runNodeTasks(ctx, tasks, now)
	errs = append(errs, s.reconcileNodeConditions(ctx, now)) // nodeconditions.go
	return errors.Join(errs...)
}

// kubeletParallelism is how many instances' kubelet steps run at once. A
// real kubelet registers its own Node, side by side with every other
// one; one loop for all of them made a wave of instances that finished
// booting together queue behind each other's API calls (two per Node
// created: about 3 s at the 50-60 instances one burst of CreateFleet
// calls launches), which delayed the autoscaler that launched at once
// and not the one whose launches trickled in. 32 is the head-to-head's
// kwok pod workers (test/headtohead), the same stand-in for independent
// kubelets.
const kubeletParallelism = 32

// runNodeTasks carries out tasks, the steps of up to kubeletParallelism
// instances at once and each instance's steps in order, and returns their
// errors.
func (s *Simulator) runNodeTasks(ctx context.Context, tasks []nodeTask, now time.Time) []error {
	var ids []string
	byID := map[string][]nodeTask{}
	for _, t := range tasks {
		if _, ok := byID[t.id]; !ok {
			ids = append(ids, t.id)
		}
		byID[t.id] = append(byID[t.id], t)
	}
	var (
		mu   sync.Mutex
		errs []error
		g    errgroup.Group
	)
	g.SetLimit(kubeletParallelism)
	for _, id := range ids {
		g.Go(func() error {
			for _, t := range byID[id] {
				if err := s.runNodeTask(ctx, t, now); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s node for %s: %w", t.kind, t.id, err))
					mu.Unlock()
				}
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines return nil; their errors are in errs
	return errs
}

func (s *Simulator) bootDelay(in *instance) time.Duration {
	if in.behavior.BootDelay != nil {
		return *in.behavior.BootDelay
	}
	return s.cfg.BootDelay
}

func (s *Simulator) runNodeTask(ctx context.Context, t nodeTask, now time.Time) error {
	log := s.log.WithValues("instanceID", t.id, "node", t.node)
	var err error
	switch t.kind {
	case "create":
		var name string
		if name, err = s.createNode(ctx, &t.in); err == nil {
			s.update(t.id, func(np *nodeProgress) {
				np.name, np.createdAt, np.ready = name, now, t.in.behavior.NotReadyFor == 0
				np.taintRemoved, np.windowEnded, np.resourceSet = map[int]bool{}, map[int]bool{}, map[int]bool{}
			})
			s.metrics.nodes.WithLabelValues("created").Inc()
			log.Info("Node joined", "node", name, "instanceType", t.in.instanceType, "zone", t.in.zone)
		}
	case "ready":
		if err = s.markNodeReady(ctx, t.node); err == nil {
			s.update(t.id, func(np *nodeProgress) { np.ready = true })
			log.V(1).Info("Node ready")
		}
	case "untaint":
		taint := t.in.behavior.LateTaints[t.taintIdx].Taint
		if err = s.removeTaint(ctx, t.node, taint); err == nil {
			s.update(t.id, func(np *nodeProgress) { np.taintRemoved[t.taintIdx] = true })
			log.V(1).Info("Removed late taint", "taint", taint.ToString())
		}
	case "notready":
		var changed bool
		if changed, err = s.markNodeNotReady(ctx, t.node); err == nil && changed {
			log.Info("Node NotReady (kubelet restarting)", "window", t.taintIdx)
		}
	case "windowend":
		if err = s.markNodeReady(ctx, t.node); err == nil {
			s.update(t.id, func(np *nodeProgress) { np.windowEnded[t.taintIdx] = true })
			log.Info("Node Ready again after kubelet restart", "window", t.taintIdx)
		}
	case "resource":
		r := t.in.behavior.LateResources[t.taintIdx]
		if err = s.advertiseResource(ctx, t.node, &t.in, r.Name); err == nil {
			s.update(t.id, func(np *nodeProgress) { np.resourceSet[t.taintIdx] = true })
			log.Info("Advertised late resource", "resource", r.Name)
		}
	case "delete":
		err = s.cfg.Kube.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: t.node}})
		if err == nil || apierrors.IsNotFound(err) {
			err = nil
			s.update(t.id, func(np *nodeProgress) { np.deleted = true })
			s.metrics.nodes.WithLabelValues("deleted").Inc()
			log.Info("Node deleted with its instance")
		}
	}
	if err != nil {
		failures := 0
		s.update(t.id, func(np *nodeProgress) { np.failures++; failures = np.failures })
		// Log the first failure of a step and then every 100th, not every pass.
		if failures%100 == 1 {
			log.Error(err, "Kubelet step failed; retrying", "step", t.kind, "failures", failures)
		}
	} else {
		s.update(t.id, func(np *nodeProgress) { np.failures = 0 })
	}
	return err
}

// update changes an instance's progress under the lock (the instance may be
// gone).
func (s *Simulator) update(id string, f func(*nodeProgress)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.instances[id]; in != nil {
		f(&in.node)
	}
}

// createNode registers the Node of an instance and returns its name.
func (s *Simulator) createNode(ctx context.Context, in *instance) (string, error) {
	node, err := s.nodeFor(ctx, in)
	if err != nil {
		return "", err
	}
	status := *node.Status.DeepCopy()
	if err := s.cfg.Kube.Create(ctx, node); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return "", err
		}
		existing := &corev1.Node{}
		if err := s.cfg.Kube.Get(ctx, client.ObjectKey{Name: node.Name}, existing); err != nil {
			return "", err
		}
		if existing.Spec.ProviderID != node.Spec.ProviderID {
			return "", fmt.Errorf("node %s already exists for %s", node.Name, existing.Spec.ProviderID)
		}
		return node.Name, nil // created by an earlier pass whose answer was lost
	}
	// API servers may drop status on create; kubelet then posts it.
	if len(node.Status.Capacity) == 0 || len(node.Status.Allocatable) == 0 {
		node.Status = status
		if err := s.cfg.Kube.Status().Update(ctx, node); err != nil {
			return "", fmt.Errorf("posting node status: %w", err)
		}
	}
	return node.Name, nil
}

// nodeFor builds the Node kubelet would register for an instance.
func (s *Simulator) nodeFor(ctx context.Context, in *instance) (*corev1.Node, error) {
	it, ok := catalog.Get(in.instanceType)
	if !ok {
		return nil, fmt.Errorf("instance type %s is not in the catalogue", in.instanceType)
	}
	// kubelet --node-labels / --register-with-taints (or their
	// KubeletConfiguration and Bottlerocket equivalents), which the
	// bootstrap reads from the user data (registration.go).
	s.mu.Lock()
	family := ""
	if img := s.images[in.imageID]; img != nil {
		family = img.Family
	}
	s.mu.Unlock()
	reg, err := registrationOf(family, in.userData)
	if err != nil {
		return nil, fmt.Errorf("kubelet cannot start: %w", err)
	}
	labels, taints := reg.labels, reg.taints
	// Set by kubelet itself (hostname, os, arch) and by the AWS cloud
	// controller manager (instance type, zone, region, zone id); they win
	// over user data, as the cloud provider's labels do.
	labels[corev1.LabelInstanceTypeStable] = in.instanceType
	labels[corev1.LabelTopologyZone] = in.zone
	labels[corev1.LabelTopologyRegion] = s.cfg.Region
	labels[labelZoneID] = zoneID(s.cfg.Region, in.zone)
	labels[corev1.LabelArchStable] = k8sArch(in.arch)
	labels[corev1.LabelOSStable] = "linux"
	labels[corev1.LabelHostname] = in.privateDNS
	for _, lt := range in.behavior.LateTaints {
		taints = append(taints, lt.Taint)
	}

	annotations := map[string]string{annotationProvidedIP: in.privateIP, InstanceIDAnnotation: in.id}
	if in.behavior.NotReadyFor == 0 {
		annotations[KwokNodeAnnotation] = "fake"
	} else {
		annotations[KwokStatusAnnotation] = KwokStatusCustom
	}
	capacity, allocatable := it.Capacity(), offsetResources(offsetResources(it.Allocatable, s.imageAllocatableOffset(in)), in.behavior.AllocatableOffset)
	for _, r := range in.behavior.LateResources {
		delete(capacity, r.Name)
		delete(allocatable, r.Name)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: in.privateDNS, Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///" + in.zone + "/" + in.id, Taints: dedupeTaints(taints)},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: in.privateIP},
				{Type: corev1.NodeHostName, Address: in.privateDNS},
				{Type: corev1.NodeInternalDNS, Address: in.privateDNS},
			},
			NodeInfo: s.nodeInfo(in),
		},
	}
	if in.behavior.NotReadyFor == 0 && s.cfg.MarkReady {
		node.Status.Conditions = readyConditions(s.clock.Now())
	}
	return node, nil
}

func (s *Simulator) nodeInfo(in *instance) corev1.NodeSystemInfo {
	karch := k8sArch(in.arch)
	kernelArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[karch]
	h := in.id[2:] + "000000000000000" // 32 hex digits after "ec2"
	info := corev1.NodeSystemInfo{
		MachineID:  "ec2" + h[:29],
		SystemUUID: fmt.Sprintf("ec2%s-%s-%s-%s-%s", h[0:5], h[5:9], h[9:13], h[13:17], h[17:29]),
		BootID:     fmt.Sprintf("%s-%s-4%s-8%s-%s", h[0:8], h[8:12], h[12:15], h[15:18], h[18:30]), KernelVersion: "6.12.46-66.121.amzn2023." + kernelArch,
		OSImage: "Amazon Linux 2023.9.20251027", ContainerRuntimeVersion: containerRuntimeVersion,
		KubeletVersion: s.cfg.KubeletVersion, OperatingSystem: "linux", Architecture: karch,
	}
	s.mu.Lock()
	img := s.images[in.imageID]
	s.mu.Unlock()
	if img != nil {
		switch img.Family {
		case familyAL2:
			info.OSImage, info.KernelVersion = "Amazon Linux 2", "5.10.240-238.959.amzn2."+kernelArch
		case familyBottlerocket:
			info.OSImage, info.KernelVersion = "Bottlerocket OS "+bottlerocketRelease+" (aws-k8s)", "6.12.46"
		}
	}
	return info
}

func readyConditions(now time.Time) []corev1.NodeCondition {
	t := metav1.NewTime(now)
	c := func(typ corev1.NodeConditionType, st corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: st, Reason: reason, Message: msg, LastHeartbeatTime: t, LastTransitionTime: t}
	}
	return []corev1.NodeCondition{
		c(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		c(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		c(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		c(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
	}
}

// markNodeReady hands the Node to kwok (annotation) and, with MarkReady,
// posts the Ready condition itself.
func (s *Simulator) markNodeReady(ctx context.Context, name string) error {
	node := &corev1.Node{}
	if err := s.cfg.Kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return err
	}
	if err := s.handToKwok(ctx, node); err != nil {
		return err
	}
	if !s.cfg.MarkReady {
		return nil
	}
	base := node.DeepCopy()
	node.Status.Conditions = readyConditions(s.clock.Now())
	return s.cfg.Kube.Status().Patch(ctx, node, client.MergeFrom(base))
}

// handToKwok gives node (as read) to kwok: KwokNodeAnnotation set,
// KwokStatusAnnotation removed, as a kubelet that posts its status again.
// It updates node from the API server's answer and returns its error.
func (s *Simulator) handToKwok(ctx context.Context, node *corev1.Node) error {
	if node.Annotations[KwokNodeAnnotation] == "fake" && node.Annotations[KwokStatusAnnotation] == "" {
		return nil
	}
	base := node.DeepCopy()
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[KwokNodeAnnotation] = "fake"
	delete(node.Annotations, KwokStatusAnnotation)
	return s.cfg.Kube.Patch(ctx, node, client.MergeFrom(base))
}

// takeFromKwok takes node (as read) from kwok, so that its status is the
// simulator's to post: KwokNodeAnnotation removed and KwokStatusAnnotation
// set (see it for the kwok flags each one stops). It reports whether it
// patched anything; node is updated from the API server's answer.
func (s *Simulator) takeFromKwok(ctx context.Context, node *corev1.Node) (bool, error) {
	_, managed := node.Annotations[KwokNodeAnnotation]
	if !managed && node.Annotations[KwokStatusAnnotation] == KwokStatusCustom {
		return false, nil
	}
	base := node.DeepCopy()
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	delete(node.Annotations, KwokNodeAnnotation)
	node.Annotations[KwokStatusAnnotation] = KwokStatusCustom
	if err := s.cfg.Kube.Patch(ctx, node, client.MergeFrom(base)); err != nil {
		return false, err
	}
	return true, nil
}

// markNodeNotReady takes the Node from kwok (takeFromKwok) and posts
// Ready=False as kubelet does while its container runtime restarts. It
// reports whether it changed anything.
func (s *Simulator) markNodeNotReady(ctx context.Context, name string) (bool, error) {
	node := &corev1.Node{}
	if err := s.cfg.Kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return false, err
	}
	changed, err := s.takeFromKwok(ctx, node)
	if err != nil {
		return false, err
	}
	base := node.DeepCopy()
	now := metav1.NewTime(s.clock.Now())
	found := false
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type != corev1.NodeReady {
			continue
		}
		found = true
		if c.Status != corev1.ConditionFalse {
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, "KubeletNotReady", "container runtime status check may not have completed yet"
			c.LastHeartbeatTime, c.LastTransitionTime = now, now
			changed = true
		}
	}
	if !found {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
			Reason: "KubeletNotReady", Message: "container runtime status check may not have completed yet", LastHeartbeatTime: now, LastTransitionTime: now})
		changed = true
	}
	if !changed {
		return false, nil
	}
	return true, s.cfg.Kube.Status().Patch(ctx, node, client.MergeFrom(base))
}

// advertiseResource adds the catalogue's quantity of resource to the
// Node's capacity and allocatable, as kubelet does once a device plugin
// registers.
func (s *Simulator) advertiseResource(ctx context.Context, name string, in *instance, res corev1.ResourceName) error {
	it, ok := catalog.Get(in.instanceType)
	if !ok {
		return fmt.Errorf("instance type %s is not in the catalogue", in.instanceType)
	}
	q, ok := it.Allocatable[res]
	if !ok {
		return nil // the type has none: nothing ever appears
	}
	node := &corev1.Node{}
	if err := s.cfg.Kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return err
	}
	base := node.DeepCopy()
	if node.Status.Capacity == nil {
		node.Status.Capacity = corev1.ResourceList{}
	}
	if node.Status.Allocatable == nil {
		node.Status.Allocatable = corev1.ResourceList{}
	}
	node.Status.Capacity[res] = q.DeepCopy()
	node.Status.Allocatable[res] = q.DeepCopy()
	return s.cfg.Kube.Status().Patch(ctx, node, client.MergeFrom(base))
}

// removeTaint removes a taint (by key and effect) from a Node.
func (s *Simulator) removeTaint(ctx context.Context, name string, taint corev1.Taint) error {
	node := &corev1.Node{}
	if err := s.cfg.Kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return err
	}
	base := node.DeepCopy()
	kept := node.Spec.Taints[:0]
	for _, t := range node.Spec.Taints {
		if !(t.Key == taint.Key && t.Effect == taint.Effect) {
			kept = append(kept, t)
		}
	}
	node.Spec.Taints = kept
	return s.cfg.Kube.Patch(ctx, node, client.MergeFrom(base))
}

// dedupeTaints keeps the first taint of every key and effect.
func dedupeTaints(taints []corev1.Taint) []corev1.Taint {
	seen := map[string]bool{}
	var out []corev1.Taint
	for _, t := range taints {
		k := t.Key + ":" + string(t.Effect)
		if !seen[k] {
			seen[k] = true
			out = append(out, t)
		}
	}
	return out
}

// offsetResources returns base + offset per resource, floored at zero.
func offsetResources(base, offset corev1.ResourceList) corev1.ResourceList {
	out := base.DeepCopy()
	for k, d := range offset {
		q := out[k].DeepCopy()
		q.Add(d)
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		out[k] = q
	}
	return out
}
