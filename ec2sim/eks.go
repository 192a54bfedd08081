package ec2sim

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// EKS DescribeCluster over REST-JSON (GET /clusters/{name}), the one EKS
// call Karpenter's AWS provider makes: for the cluster endpoint when
// CLUSTER_ENDPOINT is unset, the Kubernetes version, and the service CIDR
// that AL2023's NodeConfig needs (spec.cluster.cidr). The simulated
// account has one cluster, Config.ClusterName: ACTIVE, version
// Config.KubernetesVersion, endpoint Config.ClusterEndpoint, CA
// Config.ClusterCA, service block Config.ServiceIPv4CIDR, in the subnets
// and security groups of the simulated VPC. Any other name is
// ResourceNotFoundException (404). Source of the shapes and errors: EKS API
// Reference, DescribeCluster and the Cluster type.

// eksPlatformVersion is the EKS platform version answered (EKS API
// Reference, Cluster.platformVersion: "eks.N").
const eksPlatformVersion = "eks.1"

// signingService returns the service name of the SigV4 credential scope in
// r's Authorization header ("AWS4-HMAC-SHA256 Credential=AKID/20260101/
// us-east-1/eks/aws4_request, ..."), or "" when there is none.
// aws-sdk-go-v2 signs every call, and with AWS_ENDPOINT_URL every service
// reaches this one port, so the scope names the protocol to speak.
func signingService(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	_, rest, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, ", "); i >= 0 {
		rest = rest[:i]
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" {
		return ""
	}
	return parts[3]
}

// isEKSRequest reports whether r is an EKS REST-JSON call: signed for
// "eks", or, unsigned, a request below /clusters.
func isEKSRequest(r *http.Request) bool {
	if svc := signingService(r); svc != "" {
		return svc == "eks"
	}
	return r.URL.Path == "/clusters" || strings.HasPrefix(r.URL.Path, "/clusters/")
}

type eksVPCConfig struct {
	SubnetIDs              []string `json:"subnetIds"`
	SecurityGroupIDs       []string `json:"securityGroupIds"`
	ClusterSecurityGroupID string   `json:"clusterSecurityGroupId"`
	VPCID                  string   `json:"vpcId"`
	EndpointPublicAccess   bool     `json:"endpointPublicAccess"`
	EndpointPrivateAccess  bool     `json:"endpointPrivateAccess"`
	PublicAccessCidrs      []string `json:"publicAccessCidrs"`
}

type eksNetworkConfig struct {
	ServiceIPv4CIDR string `json:"serviceIpv4Cidr"`
	IPFamily        string `json:"ipFamily"`
}

type eksCertificate struct {
	Data string `json:"data"`
}

type eksAccessConfig struct {
	AuthenticationMode string `json:"authenticationMode"`
}

type eksCluster struct {
	Name                    string            `json:"name"`
	Arn                     string            `json:"arn"`
	CreatedAt               float64           `json:"createdAt"` // epoch seconds, REST-JSON's timestamp format
	Version                 string            `json:"version"`
	Endpoint                string            `json:"endpoint"`
	RoleArn                 string            `json:"roleArn"`
	ResourcesVPCConfig      eksVPCConfig      `json:"resourcesVpcConfig"`
	KubernetesNetworkConfig eksNetworkConfig  `json:"kubernetesNetworkConfig"`
	Status                  string            `json:"status"`
	CertificateAuthority    eksCertificate    `json:"certificateAuthority"`
	PlatformVersion         string            `json:"platformVersion"`
	Tags                    map[string]string `json:"tags"`
	AccessConfig            eksAccessConfig   `json:"accessConfig"`
}

type eksDescribeClusterOutput struct {
	Cluster eksCluster `json:"cluster"`
}

// serveEKS answers one EKS REST-JSON call. Only GET /clusters/{name}
// (DescribeCluster) is an operation the simulator knows.
func (s *Simulator) serveEKS(w http.ResponseWriter, r *http.Request, reqID string) {
	name, ok := strings.CutPrefix(r.URL.EscapedPath(), "/clusters/")
	if ok {
		name, _ = url.PathUnescape(name)
	}
	if r.Method != http.MethodGet || !ok || name == "" || strings.Contains(name, "/") {
		e := &APIError{Code: "UnknownOperationException", Message: "Unknown operation " + r.Method + " " + r.URL.Path, HTTPStatus: http.StatusNotFound}
		s.metrics.observe(serviceEKS, "Unknown", 0, e, false)
		writeRESTJSONError(w, reqID, e)
		return
	}
	s.responseDelay()
	spec := lookupAction("DescribeCluster")
	// The cluster name travels in the path; the handler reads it from json.
	body, _ := json.Marshal(map[string]string{"name": name})
	s.serveJSON(w, r, reqID, spec, body, "application/json", writeRESTJSONError)
}

func (s *Simulator) describeCluster(req *request) (any, error) {
	var in struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(req.json, &in)
	if in.Name != s.cfg.ClusterName {
		return nil, &APIError{Code: "ResourceNotFoundException", Message: "No cluster found for name: " + in.Name + ".", HTTPStatus: http.StatusNotFound}
	}
	c := eksCluster{
		Name:      s.cfg.ClusterName,
		Arn:       "arn:aws:eks:" + s.cfg.Region + ":" + s.cfg.AccountID + ":cluster/" + s.cfg.ClusterName,
		CreatedAt: float64(imageEpoch.Unix()),
		Version:   s.cfg.KubernetesVersion, Endpoint: s.cfg.ClusterEndpoint,
		RoleArn:                 "arn:aws:iam::" + s.cfg.AccountID + ":role/" + s.cfg.ClusterName + "-cluster",
		KubernetesNetworkConfig: eksNetworkConfig{ServiceIPv4CIDR: s.cfg.ServiceIPv4CIDR, IPFamily: "ipv4"},
		Status:                  "ACTIVE",
		CertificateAuthority:    eksCertificate{Data: base64.StdEncoding.EncodeToString(s.cfg.ClusterCA)},
		PlatformVersion:         eksPlatformVersion,
		Tags:                    map[string]string{},
		AccessConfig:            eksAccessConfig{AuthenticationMode: "API_AND_CONFIG_MAP"},
		ResourcesVPCConfig:      eksVPCConfig{EndpointPublicAccess: true, EndpointPrivateAccess: true, PublicAccessCidrs: []string{"0.0.0.0/0"}},
	}
	for _, sn := range s.cfg.Subnets {
		c.ResourcesVPCConfig.SubnetIDs = append(c.ResourcesVPCConfig.SubnetIDs, sn.ID)
		c.ResourcesVPCConfig.VPCID = sn.VPCID
	}
	for _, sg := range s.cfg.SecurityGroups {
		c.ResourcesVPCConfig.SecurityGroupIDs = append(c.ResourcesVPCConfig.SecurityGroupIDs, sg.ID)
		if c.ResourcesVPCConfig.ClusterSecurityGroupID == "" {
			c.ResourcesVPCConfig.ClusterSecurityGroupID = sg.ID
		}
	}
	return &eksDescribeClusterOutput{Cluster: c}, nil
}

// writeRESTJSONError writes the REST-JSON error shape aws-sdk-go-v2's
// restjson deserializers read: the code in X-Amzn-ErrorType, the text in
// the body's "message".
func writeRESTJSONError(w http.ResponseWriter, reqID string, e *APIError) {
	writeErrorHeader(w, "application/json", reqID, e)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": e.Message})
}
