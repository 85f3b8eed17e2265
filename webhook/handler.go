package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/go-github/v66/github"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// MaxBody is the largest delivery body accepted, 25 MiB (GitHub caps
// payloads at 25 MB); a larger one is answered 413 without being read
// further.
const MaxBody = 25 << 20

// Delivery headers.
const (
	EventHeader    = github.EventTypeHeader  // X-GitHub-Event
	DeliveryHeader = github.DeliveryIDHeader // X-GitHub-Delivery
)

const (
	// maxEventLen and maxDeliveryLen bound the header values stored; GitHub's
	// are a short event name and a UUID. A delivery ID is also the queue's
	// idempotency key, and one longer than what an answer or a log may
	// echo of it is refused.
	maxEventLen    = 100
	maxDeliveryLen = MaxEchoedHeader
)

// Outcome is what the intake did with a verified delivery (docs/webhook.md).
type Outcome string

// The outcomes. A redelivery answers OutcomeReplay or
// OutcomeIdempotencyConflict and keeps the first arrival's stored outcome.
const (
	OutcomeEnqueued             Outcome = "enqueued"
	OutcomeReplay               Outcome = "replay"
	OutcomeSubjectCollision     Outcome = "subject_collision"
	OutcomeReservationCollision Outcome = "reservation_collision"
	OutcomeCancelled            Outcome = "cancelled"
	OutcomeIgnored              Outcome = "ignored"
	OutcomeIdempotencyConflict  Outcome = "idempotency_conflict"
)

// Status is the HTTP status an outcome is answered with.
func (o Outcome) Status() int {
	switch o {
	case OutcomeEnqueued:
		return http.StatusAccepted
	case OutcomeIdempotencyConflict:
		return http.StatusConflict
	}
	return http.StatusOK
}

// Response is the JSON body of every answer. Outcome and the item fields are
// set for a verified delivery, Error for a rejected one.
type Response struct {
	DeliveryID  string  `json:"delivery_id,omitempty"`
	Outcome     Outcome `json:"outcome,omitempty"`
	EntryID     string  `json:"entry_id,omitempty"`
	QualifiedID string  `json:"qualified_id,omitempty"`
	Generation  *uint64 `json:"generation,omitempty"`
	Reason      string  `json:"reason,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// Result is a verified delivery's answer together with what it was about,
// as HandlerConfig.OnOutcome sees it.
type Result struct {
	Response
	Event    string
	Decision Decision
	// TraceParent is the delivery's trace (W3C traceparent of its record
	// span), "" untraced: the outbox rows written for it join that trace.
	TraceParent string
	// status overrides Outcome.Status for a rolled-back delivery.
	status int
}

// Status is the HTTP status the delivery is answered with.
func (r Result) Status() int {
	if r.status != 0 {
		return r.status
	}
	return r.Outcome.Status()
}

// HandlerConfig configures a Handler. The zero value is usable.
type HandlerConfig struct {
	// Timeout bounds the recording transaction, pool acquisition included,
	// so an unreachable database answers 503 instead of hanging. Default 2s.
	Timeout time.Duration
	// LookupTimeout bounds the GitHub call a comment command on a pull
	// request makes. Default 5s.
	LookupTimeout time.Duration
	// Now stamps received_at; time.Now when nil.
	Now func() time.Time
	// OnOutcome, if set, runs inside the delivery's transaction once its
	// outcome is known, before the commit, so feedback (check runs through
	// the outbox) is written atomically with it. An error rolls everything
	// back and answers 503.
	OnOutcome func(ctx context.Context, tx pgx.Tx, r Result) error
	// CheckSuites, if set, finds the entry of a check suite's Re-run; a
	// check_suite rerequested is ignored without it.
	CheckSuites CheckSuiteLookup
	// OnAnswer, if set, is called once per request after it was answered
	// (for metrics) with the outcome, or "rejected" for a 4xx refusal,
	// "unavailable" for a 503 and "error" for a 500.
	OnAnswer func(outcome string)
	// MaxInflightBody bounds the body bytes held by all deliveries at once
	// (GITLEASE_MAX_INFLIGHT_BODY); past it a delivery is answered 503.
	// Default DefaultMaxInflightBody.
	MaxInflightBody int64
	// GroupSize is the most first arrivals recorded in one transaction
	// (group.go; GITLEASE_INTAKE_GROUP_SIZE): 1 gives every delivery a
	// transaction of its own. Default DefaultGroupSize.
	GroupSize int
	// Groups is the most such transactions at once (GITLEASE_INTAKE_GROUPS).
	// Default DefaultGroups.
	Groups int
	// OnGroup, if set, is told of every group of two or more deliveries
	// after its transaction ended: its size and whether it committed (when
	// not, its deliveries were recorded one by one).
	OnGroup func(size int, committed bool)
	// TracerProvider, if set, traces each delivery: a "webhook verify" span
	// and a "webhook record" span for its transaction, children of the
	// request's span (docs/observability.md). Nil: no spans.
	TracerProvider trace.TracerProvider
}

// tracerName names the intake's spans' instrumentation scope.
const tracerName = "github.com/gitlease/gitlease/webhook"

// DefaultTimeout is HandlerConfig.Timeout's default.
const DefaultTimeout = 2 * time.Second

// Handler is the POST /webhook endpoint. It verifies a delivery, records it
// and acts on it in one transaction, and answers only after the commit. It is
// safe for concurrent use.
type Handler struct {
	store    *queue.Store
	verifier *Verifier
	mapper   *Mapper
	q        *dbq.Queries
	logger   *slog.Logger
	cfg      HandlerConfig
	budget   *bodyBudget
	group    *committer // nil: every delivery alone
	bodies   chunkPool
	tracer   trace.Tracer
}

// NewHandler returns the webhook endpoint over store, verifying with
// verifier and deciding with mapper.
func NewHandler(store *queue.Store, verifier *Verifier, mapper *Mapper, logger *slog.Logger, cfg HandlerConfig) *Handler {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.LookupTimeout <= 0 {
		cfg.LookupTimeout = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.GroupSize <= 0 {
		cfg.GroupSize = DefaultGroupSize
	}
	if cfg.Groups <= 0 {
		cfg.Groups = DefaultGroups
	}
	if cfg.OnGroup == nil {
		cfg.OnGroup = func(int, bool) {}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	return &Handler{store: store, verifier: verifier, mapper: mapper, q: dbq.New(), logger: logger, cfg: cfg,
		budget: newBodyBudget(cfg.MaxInflightBody), group: newCommitter(cfg.GroupSize, cfg.Groups),
		tracer: cfg.TracerProvider.Tracer(tracerName)}
}

// ServeHTTP handles one delivery. Before anything is stored it answers, in
// this order, 413 for a body over MaxBody, 400 for a missing X-GitHub-Event
// or X-GitHub-Delivery, 401 for a missing or malformed signature header
// (before reading the body), 503 when MaxInflightBody bytes of bodies are
// already held, 401 for a wrong signature and 400 for a body that is not
// the event's JSON. A verified delivery is recorded and acted on
// in one transaction and answered with its Outcome's status after the commit;
// 503 when the database is unavailable, in which case nothing is stored.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lg := &deliveryLog{logger: h.logger, r: r, start: time.Now()}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.reject(w, lg, http.StatusMethodNotAllowed, "", "webhook deliveries are POSTed")
		return
	}
	if status, msg := h.budget.admit(r); status != 0 {
		deliveryID := Echoable(r.Header.Get(DeliveryHeader))
		lg.add(slog.String("delivery_id", deliveryID))
		h.reject(w, lg, status, deliveryID, msg)
		return
	}
	metered := newMeteredBody(w, http.MaxBytesReader(w, r.Body, MaxBody), h.budget, lg.start)
	defer metered.close()
	// Nothing of a delivery refers to its body once it is answered: the
	// parse copies what it keeps.
	raw := h.bodies.body()
	defer raw.release()
	status, msg := readBody(w, metered, raw)
	event, deliveryID := r.Header.Get(EventHeader), r.Header.Get(DeliveryHeader)
	lg.add(slog.String("delivery_id", Echoable(deliveryID)), slog.String("event", Echoable(event)))
	if status != 0 {
		h.reject(w, lg, status, Echoable(deliveryID), msg)
		return
	}
	if msg := checkHeaders(event, deliveryID); msg != "" {
		h.reject(w, lg, http.StatusBadRequest, Echoable(deliveryID), msg)
		return
	}
	_, verifySpan := h.tracer.Start(r.Context(), "webhook verify")
	// Verified chunk by chunk: a body without the secret is never copied.
	secretIndex, err := h.verifier.VerifyParts(r.Header.Get(SignatureHeader), raw.parts()...)
	if err != nil {
		verifySpan.SetStatus(codes.Error, err.Error())
		verifySpan.End()
		h.reject(w, lg, http.StatusUnauthorized, deliveryID, err.Error())
		return
	}
	verifySpan.End()
	body := raw.bytes()
	payload, err := DecodeBody(r.Header.Get("Content-Type"), body)
	if err != nil {
		h.reject(w, lg, http.StatusBadRequest, deliveryID, err.Error())
		return
	}
	lookupCtx, cancel := context.WithTimeout(r.Context(), h.cfg.LookupTimeout)
	dec, err := h.mapper.Map(lookupCtx, event, deliveryID, payload)
	cancel()
	var perr *PayloadError
	var lerr *LookupError
	switch {
	case errors.As(err, &perr):
		h.reject(w, lg, http.StatusBadRequest, deliveryID, perr.Error())
		return
	case errors.As(err, &lerr):
		lg.failed(slog.LevelWarn, "webhook delivery not recorded: a GitHub lookup failed", lerr)
		h.reject(w, lg, http.StatusServiceUnavailable, deliveryID, "could not look up on GitHub what this delivery needs; redeliver later")
		return
	case err != nil:
		lg.failed(slog.LevelError, "webhook delivery not recorded: mapping failed", err)
		h.reject(w, lg, http.StatusInternalServerError, deliveryID, "internal error")
		return
	}
	if dec.Facts.InstallationID != nil {
		lg.add(slog.Int64("installation_id", *dec.Facts.InstallationID))
	}
	if dec.Facts.Repository != nil {
		lg.add(slog.String("repo", *dec.Facts.Repository))
	}

	sum := sha256.Sum256(body)
	recordCtx, recordSpan := h.tracer.Start(r.Context(), "webhook record")
	res, err := h.record(recordCtx, arrival{
		event: event, deliveryID: deliveryID, secretIndex: secretIndex,
		bodySHA256: hex.EncodeToString(sum[:]), decision: dec, traceParent: queue.TraceParent(recordCtx),
	})
	endRecordSpan(recordSpan, res, err)
	if err != nil {
		if unavailable(err) {
			lg.failed(slog.LevelError, "webhook delivery not recorded: database unavailable", err)
			h.reject(w, lg, http.StatusServiceUnavailable, deliveryID, "database unavailable; redeliver later")
			return
		}
		lg.failed(slog.LevelError, "webhook delivery not recorded", err)
		h.reject(w, lg, http.StatusInternalServerError, deliveryID, "internal error")
		return
	}
	if res.Error != "" {
		h.reject(w, lg, res.Status(), deliveryID, res.Error)
		return
	}
	lg.add(slog.String("outcome", string(res.Outcome)), slog.Int("secret_index", secretIndex))
	if res.EntryID != "" {
		lg.add(slog.String("entry_id", res.EntryID))
	}
	if res.QualifiedID != "" {
		lg.add(slog.String("qualified_id", res.QualifiedID))
	}
	if res.Generation != nil {
		lg.add(slog.Uint64("generation", *res.Generation))
	}
	if res.Reason != "" {
		lg.add(slog.String("reason", res.Reason))
	}
	writeJSON(w, res.Status(), res.Response)
	lg.line(slog.LevelInfo, "webhook delivery", res.Status())
	h.answered(string(res.Outcome))
}

// endRecordSpan ends a delivery's record span with what came of it.
func endRecordSpan(span trace.Span, res Result, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, "not recorded")
	case res.Error != "":
		span.SetStatus(codes.Error, res.Error)
	}
	span.SetAttributes(attribute.String("gitlease.delivery.outcome", string(res.Outcome)))
	if res.EntryID != "" {
		span.SetAttributes(attribute.String("gitlease.entry_id", res.EntryID))
	}
	span.End()
}

// deliveryLog collects what is known about a delivery as the intake goes,
// for the one log line each request gets (the request log writes none for
// the webhook route): its attributes, then the answer's status and how long
// it took.
type deliveryLog struct {
	logger *slog.Logger
	r      *http.Request
	start  time.Time
	attrs  []slog.Attr
	logged bool
	// why the delivery was not recorded, for a 5xx answer
	failLevel slog.Level
	failMsg   string
	failErr   error
}

func (l *deliveryLog) add(as ...slog.Attr) { l.attrs = append(l.attrs, as...) }

// line writes the request's line, once.
func (l *deliveryLog) line(level slog.Level, msg string, status int, extra ...slog.Attr) {
	if l.logged {
		return
	}
	l.logged = true
	as := append(l.attrs, extra...)
	as = append(as, slog.Int("status", status), slog.Duration("duration", time.Since(l.start)))
	l.logger.LogAttrs(l.r.Context(), level, msg, as...)
}

// failed records why a delivery could not be recorded, for the line its
// 5xx answer writes.
func (l *deliveryLog) failed(level slog.Level, msg string, err error) {
	l.failLevel, l.failMsg, l.failErr = level, msg, err
}

func (h *Handler) answered(outcome string) {
	if h.cfg.OnAnswer != nil {
		h.cfg.OnAnswer(outcome)
	}
}

// readBody reads the metered request body (at most MaxBody bytes) into
// into. A non-zero status means the body was refused: 413 over MaxBody,
// 503 past the body budget, 408 for a sender too slow (its connection is
// closed after the answer), 400 for any other read failure.
func readBody(w http.ResponseWriter, r io.Reader, into *chunks) (int, string) {
	err := into.readFrom(r)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "body larger than 25 MiB"
	case errors.Is(err, errBudget):
		return http.StatusServiceUnavailable, errBudget.Error()
	case errors.Is(err, errTooSlow):
		w.Header().Set("Connection", "close")
		return http.StatusRequestTimeout, errTooSlow.Error() + " after its first second: cut off"
	case err != nil:
		return http.StatusBadRequest, "could not read the request body"
	}
	return 0, ""
}

// MaxEchoedHeader is the most of a request header's value the intake
// echoes in an answer or writes to a log (SPEC §5).
const MaxEchoedHeader = 128

// Echoable cuts a request header's value to MaxEchoedHeader bytes, on a
// character boundary, before it is echoed or logged.
func Echoable(v string) string {
	if len(v) <= MaxEchoedHeader {
		return v
	}
	v = v[:MaxEchoedHeader]
	for len(v) > 0 && !utf8.ValidString(v) {
		v = v[:len(v)-1]
	}
	return v
}

// checkHeaders returns why the event and delivery headers are unusable, or
// "".
func checkHeaders(event, deliveryID string) string {
	switch {
	case event == "":
		return "missing " + EventHeader + " header"
	case deliveryID == "":
		return "missing " + DeliveryHeader + " header"
	case len(event) > maxEventLen || !printable(event):
		return "malformed " + EventHeader + " header"
	case len(deliveryID) > maxDeliveryLen || !printable(deliveryID) || strings.TrimSpace(deliveryID) != deliveryID:
		return "malformed " + DeliveryHeader + " header"
	}
	return ""
}

// printable reports whether s is printable ASCII without spaces inside.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func (h *Handler) reject(w http.ResponseWriter, lg *deliveryLog, status int, deliveryID, msg string) {
	writeJSON(w, status, Response{DeliveryID: deliveryID, Error: msg})
	switch {
	case lg.failErr != nil:
		lg.line(lg.failLevel, lg.failMsg, status, slog.Any("err", lg.failErr))
	case status < 500:
		lg.line(slog.LevelInfo, "webhook delivery rejected", status, slog.String("reason", msg))
	default:
		lg.line(slog.LevelWarn, "webhook delivery rejected", status, slog.String("reason", msg))
	}
	switch {
	case status < 500:
		h.answered("rejected")
	case status == http.StatusServiceUnavailable:
		h.answered("unavailable")
	default:
		h.answered("error")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The client may be gone; there is nobody to tell.
	_ = json.NewEncoder(w).Encode(v)
}

// unavailable reports whether err means the database could not be reached
// or could not take the transaction now (connection failures, timeouts,
// shutdowns, serialization failures, a read-only server during a
// failover), as opposed to a statement the server rejected.
func unavailable(err error) bool {
	if db.ReadOnly(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	if len(pgErr.Code) < 2 {
		return false
	}
	switch pgErr.Code[:2] {
	case "08", "40", "53", "57", "58":
		return true
	}
	return false
}
