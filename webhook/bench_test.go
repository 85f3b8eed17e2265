package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/webhook"
)

// benchPayloadSize is the size the benchmark's pull_request body is padded
// to: a realistic delivery, GitHub's are compact JSON of 15-25 KB.
const benchPayloadSize = 20 << 10

// benchParallelism multiplies GOMAXPROCS for the parallel variants: the work
// waits on Postgres, so more goroutines than cores keep it busy.
const benchParallelism = 4

// numberToken stands for the pull request number in the template; the
// benchmark replaces it with a counter of the same width.
const numberToken = "900000001"

// benchTemplate is the pull_request-opened fixture as compact JSON, padded
// to about benchPayloadSize, with numberToken as its number and in its head
// ref, so each iteration can be a new subject and a new reservation.
func benchTemplate(tb testing.TB) []byte {
	tb.Helper()
	build := func(pad int) []byte {
		return edit(tb, "pull_request-opened", func(m map[string]any) {
			pr := obj(m, "pull_request")
			m["number"] = json.Number(numberToken)
			pr["number"] = json.Number(numberToken)
			obj(pr, "head")["ref"] = "bench-" + numberToken
			pr["body"] = pr["body"].(string) + "\n\n" + strings.Repeat("x", pad)
		})
	}
	b := build(0)
	if len(b) < benchPayloadSize {
		b = build(benchPayloadSize - len(b))
	}
	return b
}

// BenchmarkHandler measures the whole intake path for a new pull request:
// read, verify (two configured secrets), decode, map, record the delivery,
// enqueue, store the outcome, commit, answer. Every iteration is a new
// delivery ID and subject; the client-side signing is included.
func BenchmarkHandler(b *testing.B) {
	tmpl := benchTemplate(b)
	secret := []byte(testSecrets[0])
	run := func(b *testing.B, parallel bool) {
		e := newEnvOn(b, dbtest.New(b), defaultOptions())
		var n atomic.Int64
		n.Store(100000000)
		once := func() {
			num := strconv.FormatInt(n.Add(1), 10)
			body := bytes.ReplaceAll(tmpl, []byte(numberToken), []byte(num))
			r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
			r.Header.Set("Content-Type", webhook.ContentTypeJSON)
			r.Header.Set(webhook.EventHeader, "pull_request")
			r.Header.Set(webhook.DeliveryHeader, "bench-"+num)
			r.Header.Set(webhook.SignatureHeader, webhook.Sign(secret, body))
			w := httptest.NewRecorder()
			e.handler.ServeHTTP(w, r)
			if w.Code != http.StatusAccepted {
				b.Errorf("answer %d %s", w.Code, w.Body.String())
			}
		}
		b.SetBytes(int64(len(tmpl)))
		b.ReportAllocs()
		b.ResetTimer()
		if parallel {
			b.SetParallelism(benchParallelism)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					once()
				}
			})
		} else {
			for b.Loop() {
				once()
			}
		}
	}
	b.Run("sequential", func(b *testing.B) { run(b, false) })
	b.Run("parallel", func(b *testing.B) { run(b, true) })
}

// BenchmarkPlainInsert is the baseline for BenchmarkHandler: one
// transaction inserting the same bytes into a plain table on the same kind
// of database.
func BenchmarkPlainInsert(b *testing.B) {
	tmpl := benchTemplate(b)
	run := func(b *testing.B, parallel bool) {
		pool := dbtest.New(b)
		ctx := context.Background()
		if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_plain (id bigserial primary key, body bytea)`); err != nil {
			b.Fatal(err)
		}
		once := func() {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO bench_plain (body) VALUES ($1)`, tmpl)
				return err
			})
			if err != nil {
				b.Error(err)
			}
		}
		b.SetBytes(int64(len(tmpl)))
		b.ReportAllocs()
		b.ResetTimer()
		if parallel {
			b.SetParallelism(benchParallelism)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					once()
				}
			})
		} else {
			for b.Loop() {
				once()
			}
		}
	}
	b.Run("sequential", func(b *testing.B) { run(b, false) })
	b.Run("parallel", func(b *testing.B) { run(b, true) })
}
