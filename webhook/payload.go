package webhook

import (
	"fmt"
	"mime"
	"net/url"
)

// Content types GitHub delivers with.
const (
	ContentTypeJSON = "application/json"
	ContentTypeForm = "application/x-www-form-urlencoded"
)

// PayloadError is returned when a delivery's body is not the JSON GitHub
// sends for its event: an unsupported content type, a form without its
// payload field, JSON that does not parse into the event's type, or an event
// missing a part gitlease needs (its repository, issue or pull request). The
// handler answers it with 400 and stores nothing.
type PayloadError struct {
	Event  string
	Reason string
}

func (e *PayloadError) Error() string {
	if e.Event == "" {
		return "invalid webhook payload: " + e.Reason
	}
	return "invalid " + e.Event + " payload: " + e.Reason
}

func payloadErrorf(event, format string, args ...any) *PayloadError {
	return &PayloadError{Event: event, Reason: fmt.Sprintf(format, args...)}
}

// DecodeBody returns the JSON payload of a delivery body given its
// Content-Type header: the body itself for application/json, the "payload"
// form field for application/x-www-form-urlencoded (parameters such as
// charset are allowed). The signature covers the body, not the payload, so
// verify before decoding.
//
// It returns a *PayloadError for any other content type, a form that does
// not parse or has no payload field.
func DecodeBody(contentType string, body []byte) ([]byte, error) {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, payloadErrorf("", "unsupported Content-Type %q (GitHub sends %s or %s)", contentType, ContentTypeJSON, ContentTypeForm)
	}
	switch mediaType {
	case ContentTypeJSON:
		return body, nil
	case ContentTypeForm:
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, payloadErrorf("", "form body does not parse: %v", err)
		}
		if !form.Has("payload") {
			return nil, payloadErrorf("", "form body has no payload field")
		}
		return []byte(form.Get("payload")), nil
	}
	return nil, payloadErrorf("", "unsupported Content-Type %q (GitHub sends %s or %s)", mediaType, ContentTypeJSON, ContentTypeForm)
}

// Facts are the parts of a delivery that are recorded for every event,
// whatever its type: who sent it, where and for which installation. Absent
// parts are nil.
type Facts struct {
	Action         *string
	InstallationID *int64
	RepositoryID   *int64
	Repository     *string // full name, owner/repo
	Sender         *string // login
}
