package ec2sim

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ImageAllocatable makes Nodes booted from some AMIs report a different
// status.allocatable than the catalogue's, as real images do: an NVIDIA
// image's driver and daemons reserve more memory than a standard one, and
// Bottlerocket reserves differently from AL2023. It is how the learned
// capacity of problem P3 is exercised.
type ImageAllocatable struct {
	// NameContains selects the images whose name contains it, for example
	// "-nvidia-" or "bottlerocket-aws-k8s-1.35-x86_64".
	NameContains string
	// Offset is added to the catalogue's allocatable (negative quantities
	// reduce it; results are floored at zero), before any per-instance
	// Behavior offset.
	Offset corev1.ResourceList
}

// SetImageAllocatable replaces the image allocatable offsets; Nodes
// created afterwards use them. The first rule whose NameContains matches
// an instance's image applies.
func (s *Simulator) SetImageAllocatable(rules ...ImageAllocatable) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.imageAllocatable = append([]ImageAllocatable(nil), rules...)
}

// imageAllocatableOffset returns the offset of in's image (nil for none).
func (s *Simulator) imageAllocatableOffset(in *instance) corev1.ResourceList {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, ok := s.images[in.imageID]
	if !ok {
		return nil
	}
	for _, r := range s.imageAllocatable {
		if strings.Contains(img.Name, r.NameContains) {
			return r.Offset
		}
	}
	return nil
}
