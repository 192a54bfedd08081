package ec2sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/karpx/karpx/catalog"
)

// The AWS Price List Query API's GetProducts (AWS JSON 1.1, X-Amz-Target:
// AWSPriceListService.GetProducts), with the EC2 on-demand Linux products
// of the catalogue in Config.Region at the catalogue's prices, so that
// Karpenter's AWS provider (pkg/providers/pricing) and karpx price
// on-demand capacity alike. Each product is one aws_v1 price list item
// (product.productFamily, product.attributes, terms.OnDemand.<term>.
// priceDimensions.<rate>.pricePerUnit.USD): non-metal types as "Compute
// Instance" with tenancy Shared, metal types as "Compute Instance (bare
// metal)" with tenancies Shared and Dedicated. Source of the request
// limits and errors: AWS Price List Service API Reference, GetProducts
// (MaxResults 1–100, at most 50 filters, filter types TERM_MATCH, EQUALS,
// CONTAINS, ANY_OF, NONE_OF, FormatVersion aws_v1).

// Price list constants: aws_v1 is the only format version; JRTCKXETXF is
// the offer term code of on-demand terms and 6YS6EN2CT7 the rate code of
// their hourly price dimension in every public EC2 price list.
const (
	priceListFormat     = "aws_v1"
	onDemandTermCode    = "JRTCKXETXF"
	onDemandRateCode    = "6YS6EN2CT7"
	maxPricingFilters   = 50
	maxPricingPageSize  = 100
	priceListPublished  = "2026-11-01T00:00:00Z"
	priceListVersion    = "20261101000000"
	ec2PricingService   = "AmazonEC2"
	pricingFilterFields = "ServiceCode and attribute names"
)

type pricingFilter struct {
	Type  string `json:"Type"`
	Field string `json:"Field"`
	Value string `json:"Value"`
}

type getProductsInput struct {
	ServiceCode   string          `json:"ServiceCode"`
	Filters       []pricingFilter `json:"Filters"`
	FormatVersion string          `json:"FormatVersion"`
	NextToken     string          `json:"NextToken"`
	MaxResults    *int            `json:"MaxResults"`
}

type getProductsOutput struct {
	FormatVersion string   `json:"FormatVersion"`
	PriceList     []string `json:"PriceList"`
	NextToken     string   `json:"NextToken,omitempty"`
}

// pricingProduct is one product before it is rendered: its family and
// attributes (the filterable fields) and its hourly USD price.
type pricingProduct struct {
	family string
	attrs  map[string]string
	price  float64
}

// ec2Products returns the on-demand Linux products of the catalogue in
// region, sorted by instance type and tenancy.
func ec2Products(region string) []pricingProduct {
	var out []pricingProduct
	for _, it := range catalog.All() {
		if it.OnDemandPriceUSDPerHour == nil {
			continue
		}
		family, tenancies := "Compute Instance", []string{"Shared"}
		if strings.Contains(it.Name, "metal") {
			family, tenancies = "Compute Instance (bare metal)", []string{"Dedicated", "Shared"}
		}
		for _, ten := range tenancies {
			out = append(out, pricingProduct{family: family, price: *it.OnDemandPriceUSDPerHour, attrs: map[string]string{
				"instanceType": it.Name, "instanceFamily": it.Labels[catalog.LabelInstanceFamily], "regionCode": region,
				"servicecode": ec2PricingService, "locationType": "AWS Region", "tenancy": ten, "operatingSystem": "Linux",
				"preInstalledSw": "NA", "capacitystatus": "Used", "marketoption": "OnDemand", "licenseModel": "No License required",
				"vcpu": fmt.Sprint(it.VCPUs()), "operation": "RunInstances", "usagetype": "BoxUsage:" + it.Name,
				"servicename": "Amazon Elastic Compute Cloud",
			}})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].attrs["instanceType"] < out[j].attrs["instanceType"] })
	return out
}

// field returns the value of a filter field: ServiceCode, productFamily or
// an attribute, matched case-insensitively as the Price List API does.
func (p *pricingProduct) field(name string) (string, bool) {
	switch {
	case strings.EqualFold(name, "ServiceCode"):
		return ec2PricingService, true
	case strings.EqualFold(name, "productFamily"):
		return p.family, true
	}
	for k, v := range p.attrs {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// matches reports whether p passes every filter; a product without the
// filtered field does not.
func (p *pricingProduct) matches(fs []pricingFilter) bool {
	for _, f := range fs {
		v, ok := p.field(f.Field)
		if !ok {
			return false
		}
		var hit bool
		switch f.Type {
		case "TERM_MATCH", "EQUALS":
			hit = strings.EqualFold(v, f.Value)
		case "CONTAINS":
			hit = strings.Contains(strings.ToLower(v), strings.ToLower(f.Value))
		case "ANY_OF", "NONE_OF":
			for _, want := range strings.Split(f.Value, ",") {
				hit = hit || strings.EqualFold(v, strings.TrimSpace(want))
			}
			if f.Type == "NONE_OF" {
				hit = !hit
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// render returns p as an aws_v1 price list item (a JSON document).
func (p *pricingProduct) render() string {
	sum := sha256.Sum256([]byte(p.attrs["regionCode"] + "/" + p.attrs["instanceType"] + "/" + p.attrs["tenancy"]))
	sku := strings.ToUpper(hex.EncodeToString(sum[:]))[:16]
	term := sku + "." + onDemandTermCode
	rate := term + "." + onDemandRateCode
	doc := map[string]any{
		"product":     map[string]any{"productFamily": p.family, "attributes": p.attrs, "sku": sku},
		"serviceCode": ec2PricingService,
		"terms": map[string]any{"OnDemand": map[string]any{term: map[string]any{
			"offerTermCode": onDemandTermCode, "sku": sku, "effectiveDate": priceListPublished, "termAttributes": map[string]string{},
			"priceDimensions": map[string]any{rate: map[string]any{
				"rateCode": rate, "unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": []string{},
				"description":  fmt.Sprintf("$%.4f per On Demand Linux %s Instance Hour", p.price, p.attrs["instanceType"]),
				"pricePerUnit": map[string]string{"USD": fmt.Sprintf("%.10f", p.price)},
			}},
		}}},
		"version":         priceListVersion,
		"publicationDate": priceListPublished,
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

func pricingInvalid(format string, args ...any) *APIError {
	return newError("InvalidParameterException", format, args...)
}

func (s *Simulator) getProducts(req *request) (any, error) {
	var in getProductsInput
	if err := json.Unmarshal(req.json, &in); err != nil {
		return nil, newError("SerializationException", "Start of structure or map found where not expected.")
	}
	if in.FormatVersion != "" && in.FormatVersion != priceListFormat {
		return nil, pricingInvalid("Input FormatVersion %s is not supported; use %s.", in.FormatVersion, priceListFormat)
	}
	if in.ServiceCode == "" {
		return nil, pricingInvalid("Input ServiceCode is required.")
	}
	if len(in.Filters) > maxPricingFilters {
		return nil, pricingInvalid("1 validation error detected: Value at 'filters' failed to satisfy constraint: Member must have length less than or equal to %d", maxPricingFilters)
	}
	for i, f := range in.Filters {
		switch {
		case f.Field == "" || f.Value == "":
			return nil, pricingInvalid("Filters[%d]: Field and Value are required (Field: %s).", i, pricingFilterFields)
		case f.Type != "TERM_MATCH" && f.Type != "EQUALS" && f.Type != "CONTAINS" && f.Type != "ANY_OF" && f.Type != "NONE_OF":
			return nil, pricingInvalid("Filters[%d]: Type %q is not one of TERM_MATCH, EQUALS, CONTAINS, ANY_OF, NONE_OF.", i, f.Type)
		}
	}
	size := maxPricingPageSize
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > maxPricingPageSize {
			return nil, pricingInvalid("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and %d", *in.MaxResults, maxPricingPageSize)
		}
		size = *in.MaxResults
	}
	offset := 0
	if in.NextToken != "" {
		off, ok := decodeToken(in.NextToken)
		if !ok {
			return nil, newError("InvalidNextTokenException", "The pagination token is invalid. Try again without a pagination token.")
		}
		offset = off
	}
	out := &getProductsOutput{FormatVersion: priceListFormat, PriceList: []string{}}
	if in.ServiceCode != ec2PricingService {
		return out, nil // the simulated price list holds EC2's products only
	}
	var matched []pricingProduct
	for _, p := range ec2Products(s.cfg.Region) {
		if p.matches(in.Filters) {
			matched = append(matched, p)
		}
	}
	lo, hi, next := paginate(len(matched), offset, size)
	for i := lo; i < hi; i++ {
		out.PriceList = append(out.PriceList, matched[i].render())
	}
	out.NextToken = next
	return out, nil
}
