package githubtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
)

// Transport returns an http.RoundTripper that answers every request with
// s.ServeHTTP in the calling goroutine, whatever host the request names:
// nothing goes over the network, and no port is opened. Point clients at
// URL (HandlerURL for NewHandler's server). It honours the request's
// context and never modifies the request.
func (s *Server) Transport() http.RoundTripper { return handlerTransport{s} }

// handlerTransport is Server.Transport's RoundTripper.
type handlerTransport struct{ s *Server }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	body := []byte(nil)
	if req.Body != nil {
		// The RoundTripper contract: the body is closed, even on errors.
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("githubtest: read request body: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A server-side copy: ServeMux records the matched pattern on the
	// request it routes, and a RoundTripper must not change the caller's.
	in := req.Clone(ctx)
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "127.0.0.1:0"
	if in.Host == "" {
		in.Host = req.URL.Host
	}
	w := &bufWriter{h: http.Header{}}
	t.s.ServeHTTP(w, in)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := w.buf.Bytes()
	w.h.Set("Content-Length", strconv.Itoa(len(out)))
	// Request must be set: go-github's error messages read it.
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.h, Body: io.NopCloser(bytes.NewReader(out)), ContentLength: int64(len(out)), Request: req,
	}, nil
}

// bufWriter is the http.ResponseWriter of an in-process request: it keeps
// the response until the handler returns.
type bufWriter struct {
	h      http.Header
	status int
	buf    bytes.Buffer
}

func (w *bufWriter) Header() http.Header { return w.h }

func (w *bufWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *bufWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.buf.Write(p)
}

// LogReporter returns a Reporter for a fake outside tests: a violation
// (Errorf) is logged at warning level, the misuse of a set-up method
// (Fatalf) at error level, and nothing fails. A nil logger discards both.
func LogReporter(logger *slog.Logger) Reporter {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return logReporter{logger}
}

type logReporter struct{ logger *slog.Logger }

func (logReporter) Helper() {}

func (l logReporter) Errorf(format string, args ...any) {
	l.logger.Log(context.Background(), slog.LevelWarn, fmt.Sprintf(format, args...))
}

func (l logReporter) Fatalf(format string, args ...any) {
	l.logger.Log(context.Background(), slog.LevelError, fmt.Sprintf(format, args...))
}
