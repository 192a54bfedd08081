// Package timeouts holds the NodeClaim timeouts that more than one
// controller and the operator's flags share (launch TTL, registration TTL,
// initialization grace window), so each default is declared once, and
// Default, the one way controllers fill an unset duration option.
package timeouts
