package ec2sim

import (
	"encoding/json"
	"strings"
)

// SSM Parameter Store: GetParameter over AWS JSON 1.1. It answers the public
// EKS AMI parameters (see publicImageForParameter) for any Kubernetes
// version, registering the AMI they name so DescribeImages knows it, and
// Config.Parameters.

type ssmGetParameterInput struct {
	Name           string `json:"Name"`
	WithDecryption *bool  `json:"WithDecryption,omitempty"`
}

type ssmParameter struct {
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
	LastModifiedDate float64 `json:"LastModifiedDate"` // epoch seconds
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int64   `json:"Version"`
}

type ssmGetParameterOutput struct {
	Parameter ssmParameter `json:"Parameter"`
}

func (s *Simulator) getParameter(req *request) (any, error) {
	var in ssmGetParameterInput
	if err := json.Unmarshal(req.json, &in); err != nil {
		return nil, newError("SerializationException", "Start of structure or map found where not expected.")
	}
	if in.Name == "" {
		return nil, newError("ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
	}
	if e := checkParameterName(in.Name); e != nil {
		return nil, e
	}
	name := in.Name
	// A "name:version" selector is accepted for version 1, the only one.
	if i := strings.LastIndexByte(name, ':'); i > 0 && !strings.HasPrefix(name, "arn:") {
		if name[i+1:] != "1" {
			return nil, newError("ParameterVersionNotFound", "Systems Manager could not find version %s of %s.", name[i+1:], name[:i])
		}
		name = name[:i]
	}
	out := ssmParameter{ARN: "arn:aws:ssm:" + s.cfg.Region + "::parameter" + name, DataType: "text", Name: name,
		Type: "String", Version: 1, LastModifiedDate: float64(imageEpoch.Unix())}
	if v, ok := s.cfg.Parameters[name]; ok {
		out.ARN = "arn:aws:ssm:" + s.cfg.Region + ":" + s.cfg.AccountID + ":parameter" + name
		out.Value = v
		return &ssmGetParameterOutput{Parameter: out}, nil
	}
	img, ok := publicImageForParameter(name)
	if !ok || !publishedKubernetesVersion(name) {
		return nil, newError("ParameterNotFound", "Parameter %s not found.", name)
	}
	s.mu.Lock()
	stored := s.addImage(img)
	s.mu.Unlock()
	out.DataType = "aws:ec2:image"
	out.Value = stored.ID
	return &ssmGetParameterOutput{Parameter: out}, nil
}
