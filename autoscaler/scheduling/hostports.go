package scheduling

import corev1 "k8s.io/api/core/v1"

// hostPort is one host port a pod's containers bind: protocol, host IP
// ("" or 0.0.0.0 for every address) and port.
type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

// hostPorts are the host ports in use on a node.
type hostPorts []hostPort

// podHostPorts returns the host ports pod binds (containers and init
// containers, as the kube-scheduler's NodePorts filter counts them).
// Protocol defaults to TCP.
func podHostPorts(pod *corev1.Pod) hostPorts {
	var out hostPorts
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPort{protocol: proto, ip: p.HostIP, port: p.HostPort})
			}
		}
	}
	return out
}

// wildcard reports whether ip means every address.
func wildcard(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }

// conflicts reports whether any of want is already bound: same protocol
// and port, and the same host IP or either one a wildcard.
func (h hostPorts) conflicts(want hostPorts) bool {
	for _, w := range want {
		for _, u := range h {
			if w.port == u.port && w.protocol == u.protocol && (w.ip == u.ip || wildcard(w.ip) || wildcard(u.ip)) {
				return true
			}
		}
	}
	return false
}

// add returns h with more ports bound (h itself when there are none).
func (h hostPorts) add(more hostPorts) hostPorts {
	if len(more) == 0 {
		return h
	}
	return append(append(hostPorts(nil), h...), more...)
}
