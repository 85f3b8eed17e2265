package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// maxFrame bounds one stdio message; a longer one is dropped.
const maxFrame = 32 << 20

// StdioSession is one plugin process's conversation with its host over
// stdin/stdout: one JSON-RPC message per line, requests handled concurrently,
// responses matched by id.
type StdioSession struct {
	h *Handler

	mu          sync.Mutex // guards initialized, projectRoot and writes to out
	out         *bufio.Writer
	initialized bool
	projectRoot string
}

// NewStdioSession returns a session that writes responses to out.
func NewStdioSession(h *Handler, out io.Writer) *StdioSession {
	return &StdioSession{h: h, out: bufio.NewWriter(out)}
}

// ProjectRoot is the project the host bound at initialize ("" before).
func (s *StdioSession) ProjectRoot() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.projectRoot
}

// Serve reads messages from in until EOF, exit or ctx ends, and waits for
// the calls in flight. A frame that is not JSON is dropped without a
// response, as the protocol requires. It returns nil on EOF or exit.
func (s *StdioSession) Serve(ctx context.Context, in io.Reader) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()

	r := bufio.NewReaderSize(in, 64<<10)
	var frame []byte
	for {
		line, err := r.ReadBytes('\n')
		frame = append(frame, line...)
		if len(bytes.TrimSpace(frame)) > 0 {
			switch {
			case json.Valid(frame):
				msg := append(json.RawMessage{}, bytes.TrimSpace(frame)...)
				frame = frame[:0]
				if isExit(msg) {
					return nil
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if resp := handleMessage(ctx, msg, s.route); resp != nil {
						s.write(resp)
					}
				}()
			case !incomplete(frame) || len(frame) > maxFrame:
				frame = frame[:0] // undecodable: drop it, answer nothing
			}
		} else {
			frame = frame[:0]
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

// incomplete reports whether b is the start of a JSON value that further
// lines could finish (a pretty-printed object).
func incomplete(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	return errors.Is(dec.Decode(&v), io.ErrUnexpectedEOF)
}

func isExit(msg json.RawMessage) bool {
	var m struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(msg, &m) == nil && m.Method == MethodExit
}

func (s *StdioSession) write(resp *response) {
	b := mustMarshal(resp)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.Write(b)
	s.out.WriteByte('\n')
	s.out.Flush()
}

func (s *StdioSession) route(ctx context.Context, method string, params json.RawMessage) (any, *Error, bool) {
	if method == MethodInitialize {
		res, root, err := s.h.bind(params)
		if err != nil {
			return nil, err, false
		}
		s.mu.Lock()
		s.initialized, s.projectRoot = true, root
		s.mu.Unlock()
		return res, nil, false
	}
	if r, e, noReply, ok := s.h.lifecycle(method, params); ok {
		return r, e, noReply
	}
	s.mu.Lock()
	ready := s.initialized
	s.mu.Unlock()
	if isQueueCall(method) && !ready {
		return nil, errorf(CodeNotInitialized, "gitlease received a queue/* method before initialize"), false
	}
	res, err := s.h.Call(ctx, method, params)
	return res, err, false
}
