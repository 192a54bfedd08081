// Package podcache reads the cluster's pods as pointers to the informer
// cache's own objects, without the []corev1.Pod value slice client.List
// builds (each Pod struct copied into it: about 42 MB per listing at 20,000
// pods; issue 12). The pods it returns are read-only: DeepCopy one before
// changing it.
package podcache
