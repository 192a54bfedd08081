// Package userdata generates the EC2 userData that joins a node to the
// cluster, per AMI family, merged with the EC2NodeClass's spec.userData.
//
// What is merged, per family:
//
//   - AL2023: a MIME multipart document. The parts of the user's userData
//     come first (a MIME document is split into its top-level parts with
//     lint.ParseMIME, the parser the admission webhook uses, and each part
//     is copied with its headers and body as written; anything else
//     becomes one part, typed application/node.eks.aws when it is a
//     NodeConfig and text/x-shellscript otherwise), then karpx's
//     NodeConfig (application/node.eks.aws) with spec.cluster (name,
//     apiServerEndpoint, certificateAuthority, cidr), spec.kubelet.config
//     from spec.kubelet and spec.kubelet.flags --node-labels and
//     --register-with-taints. nodeadm merges NodeConfigs in order, so
//     karpx's cluster, label and taint settings win and the user's other
//     kubelet settings are kept.
//   - AL2: a MIME multipart document: the user's parts, then a shell part
//     calling /etc/eks/bootstrap.sh with the cluster settings and
//     --kubelet-extra-args carrying the labels, taints and kubelet flags.
//   - Bottlerocket: the user's TOML with karpx's values set over it under
//     settings.kubernetes (cluster-name, api-server,
//     cluster-certificate, node-labels, node-taints, and the spec.kubelet
//     fields Bottlerocket supports); every other user table is kept.
//   - Custom: the user's userData unchanged; karpx adds nothing.
//
// Labels are limited to those the kubelet may set on its own Node (the
// NodeRestriction admission plugin rejects others, for example
// node-role.kubernetes.io/*); Karpenter copies the NodeClaim's labels to
// the Node after registration anyway. Output is deterministic (sorted
// labels, taints and keys, a fixed MIME boundary) so that equal inputs hash
// to the same launch template.
package userdata
