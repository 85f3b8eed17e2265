// Package webhook is gitlease's front door: it verifies GitHub deliveries
// (signature.go), decodes them, maps events to queue decisions (Mapper) and,
// in Handler, records each verified delivery and acts on it in one Postgres
// transaction before it answers. It owns the deliveries table (its pruner,
// NewPruner, is db/prune over webhook's statement). It promises that a
// delivery answered 2xx is recorded with what was done, that a redelivery
// of the same body does nothing new (a replay), and that a request without
// a well-formed signature header is refused before its body is read. See
// docs/webhook.md.
package webhook
