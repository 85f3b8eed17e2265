package ui

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"
)

// MaxForm is the most of a POSTed form the dashboard reads (SPEC §5):
// its forms hold a token, a CSRF token and a word or two.
const MaxForm = 16 << 10

// Reasons readForm refuses a body.
var (
	errFormTooLarge = errors.New("form larger than 16 KiB")
	errFormType     = errors.New("form is not application/x-www-form-urlencoded")
)

// readForm reads a request's URL-encoded form, at most MaxForm bytes of
// it, into its Form and PostForm, so that nothing after it (FormValue
// included) parses the body again, and never as multipart. A body of
// another type, or declared or found longer than MaxForm, is refused
// without reading more of it than MaxForm+1 bytes. A GET or HEAD request's
// form is its query.
func readForm(r *http.Request) error {
	query := r.URL.Query()
	post := url.Values{}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		var err error
		if post, err = parseFormBody(r.Header.Get("Content-Type"), r.ContentLength, r.Body); err != nil {
			return err
		}
	}
	form := url.Values{}
	for k, vs := range post {
		form[k] = append(form[k], vs...)
	}
	for k, vs := range query {
		form[k] = append(form[k], vs...)
	}
	r.PostForm, r.Form = post, form
	r.MultipartForm = &multipart.Form{} // marks the body as parsed: nothing reads it as multipart
	return nil
}

// parseFormBody parses a form body of contentType, declared length bytes
// (-1: unknown), reading at most MaxForm+1 bytes of body. An empty body
// needs no content type.
func parseFormBody(contentType string, length int64, body io.Reader) (url.Values, error) {
	if length > MaxForm {
		return nil, errFormTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(body, MaxForm+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxForm {
		return nil, errFormTooLarge
	}
	if len(b) == 0 && contentType == "" {
		return url.Values{}, nil
	}
	if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, errFormType
	}
	return url.ParseQuery(string(b))
}

// boundedForm reads every dashboard request's form with readForm before
// its handler runs: 413 for a form over MaxForm, 415 for one not
// URL-encoded, 400 for one that does not parse; the connection of a
// refused body is closed rather than drained.
func (u *UI) boundedForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := readForm(c.Request())
		switch {
		case err == nil:
			return next(c)
		case errors.Is(err, errFormTooLarge):
			c.Response().Header().Set("Connection", "close")
			return u.fail(c, http.StatusRequestEntityTooLarge, "That form is larger than 16 KiB.")
		case errors.Is(err, errFormType):
			c.Response().Header().Set("Connection", "close")
			return u.fail(c, http.StatusUnsupportedMediaType, "Dashboard forms are sent URL-encoded (application/x-www-form-urlencoded).")
		}
		return u.fail(c, http.StatusBadRequest, "The form could not be read.")
	}
}
