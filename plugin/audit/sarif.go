package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	kxlint "github.com/karpx/karpx/lint"
	"github.com/karpx/karpx/plugin"
)

// SARIF 2.1.0 (OASIS Static Analysis Results Interchange Format, errata
// 01): the subset karpx writes. Field names and required properties follow
// the standard's JSON schema (plugin/audit/testdata/sarif-schema-2.1.0.json,
// which TestSARIFSchema validates against).
const (
	// SARIFVersion is the log's version property.
	SARIFVersion = "2.1.0"
	// SARIFSchemaURI is the log's $schema: the OASIS schema.
	SARIFSchemaURI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
	// RulesDocURI is where each rule is documented (helpUri).
	RulesDocURI = "https://github.com/karpx/karpx/blob/main/docs/rules.md"
)

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version,omitempty"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID                   string            `json:"id"`
	Name                 string            `json:"name"`
	ShortDescription     sarifText         `json:"shortDescription"`
	FullDescription      sarifText         `json:"fullDescription"`
	Help                 sarifText         `json:"help"`
	HelpURI              string            `json:"helpUri"`
	DefaultConfiguration sarifRuleConfig   `json:"defaultConfiguration"`
	Properties           map[string]string `json:"properties,omitempty"`
}

type sarifRuleConfig struct {
	Level string `json:"level"`
}

type sarifResult struct {
	RuleID              string            `json:"ruleId"`
	RuleIndex           int               `json:"ruleIndex"`
	Level               string            `json:"level"`
	Message             sarifText         `json:"message"`
	Locations           []sarifLocation   `json:"locations"`
	PartialFingerprints map[string]string `json:"partialFingerprints"`
	Properties          map[string]any    `json:"properties"`
}

type sarifLocation struct {
	PhysicalLocation *sarifPhysical `json:"physicalLocation,omitempty"`
	LogicalLocations []sarifLogical `json:"logicalLocations"`
	Message          *sarifText     `json:"message,omitempty"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifLogical struct {
	Name               string `json:"name"`
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

// level maps a severity to SARIF's result level.
func level(s kxlint.Severity) string {
	if s == kxlint.SeverityDeny {
		return "error"
	}
	return "warning"
}

// resources are the plural resource names used in logical locations.
var resources = map[string]string{"NodePool": "nodepools.karpenter.sh", "EC2NodeClass": "ec2nodeclasses.karpenter.k8s.aws"}

// writeSARIF writes findings as one SARIF run of the tool "karpx" with
// every rule of the table. Each result has the object as a logical
// location (ec2nodeclasses.karpenter.k8s.aws/default/spec.userData) and,
// for -f input, the file as its physical location.
func writeSARIF(w io.Writer, findings []kxlint.ObjectFinding) error {
	rules := kxlint.Rules()
	index := map[string]int{}
	driver := sarifDriver{Name: "karpx", Version: plugin.Version, InformationURI: RulesDocURI}
	for i, r := range rules {
		index[r.ID] = i
		driver.Rules = append(driver.Rules, sarifRule{
			ID: r.ID, Name: r.Name,
			ShortDescription:     sarifText{r.Summary},
			FullDescription:      sarifText{r.Why},
			Help:                 sarifText{r.Fix + " Source: " + r.Source},
			HelpURI:              RulesDocURI + "#" + strings.ToLower(r.ID),
			DefaultConfiguration: sarifRuleConfig{level(r.Severity)},
			Properties:           map[string]string{"appliesTo": r.Kind},
		})
	}
	results := []sarifResult{}
	for _, f := range findings {
		fqn := fmt.Sprintf("%s/%s", resources[f.Kind], f.Name)
		if f.Field != "" {
			fqn += "/" + f.Field
		}
		loc := sarifLocation{LogicalLocations: []sarifLogical{{Name: f.Name, FullyQualifiedName: fqn, Kind: "object"}}}
		if f.Line > 0 {
			loc.Message = &sarifText{f.Location()}
		}
		if f.Source != ClusterSource && f.Source != "" {
			loc.PhysicalLocation = &sarifPhysical{ArtifactLocation: sarifArtifact{URI: toURI(f.Source)}}
		}
		msg := f.Message
		if f.Fix != "" {
			msg += ". Fix: " + f.Fix
		}
		props := map[string]any{"kind": f.Kind, "name": f.Name, "field": f.Field, "source": f.Source}
		if f.Line > 0 {
			props["line"] = f.Line
		}
		if f.Document > 0 {
			props["document"] = f.Document
		}
		results = append(results, sarifResult{
			RuleID: f.RuleID, RuleIndex: index[f.RuleID], Level: level(f.Severity),
			Message:             sarifText{fmt.Sprintf("%s %s %s: %s", f.Kind, f.Name, f.Location(), msg)},
			Locations:           []sarifLocation{loc},
			PartialFingerprints: map[string]string{"karpxObjectField/v1": f.RuleID + "/" + fqn},
			Properties:          props,
		})
	}
	log := sarifLog{Schema: SARIFSchemaURI, Version: SARIFVersion, Runs: []sarifRun{{Tool: sarifTool{Driver: driver}, Results: results}}}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(log)
}

// toURI turns a file path into a relative URI reference with forward
// slashes, as SARIF's artifactLocation.uri requires.
func toURI(p string) string {
	p = strings.ReplaceAll(p, "\\", "/")
	return strings.ReplaceAll(p, " ", "%20")
}
