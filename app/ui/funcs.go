package ui

import (
	"fmt"
	"html/template"
	"net/url"
	"time"
)

// funcs are the templates' helpers; now is the dashboard's clock.
func funcs(now func() time.Time) template.FuncMap {
	return template.FuncMap{
		"ts": func(t any) string {
			switch v := t.(type) {
			case time.Time:
				return v.UTC().Format("2006-01-02 15:04:05Z")
			case *time.Time:
				if v != nil {
					return v.UTC().Format("2006-01-02 15:04:05Z")
				}
			}
			return ""
		},
		"ago": func(t any) string {
			var v time.Time
			switch x := t.(type) {
			case time.Time:
				v = x
			case *time.Time:
				if x == nil {
					return ""
				}
				v = *x
			}
			return ago(now().Sub(v))
		},
		"due": func(t time.Time) string {
			if !t.After(now()) {
				return "due now"
			}
			return ago(now().Sub(t))
		},
		"short": func(s string) string {
			if len(s) > 8 {
				return s[:8]
			}
			return s
		},
		"deref": func(p any) any {
			switch v := p.(type) {
			case *string:
				if v != nil {
					return *v
				}
				return ""
			case *int64:
				if v != nil {
					return *v
				}
				return ""
			case *int32:
				if v != nil {
					return *v
				}
				return ""
			}
			return p
		},
		"writes": func(p page, rows any, back string) writesView {
			return writesView{Page: p, Rows: rows, Back: back}
		},
		"withParam": func(v url.Values, k, val string) string {
			out := url.Values{}
			for key, vals := range v {
				out[key] = vals
			}
			if val == "" {
				out.Del(k)
			} else {
				out.Set(k, val)
			}
			return out.Encode()
		},
	}
}

// ago renders a duration as "3m ago" (or "in 3m" for the future).
func ago(d time.Duration) string {
	if d < 0 {
		return "in " + round(-d)
	}
	return round(d) + " ago"
}

func round(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// writesView is a table of GitHub writes inside a page; Back names the page
// a retry returns to ("item", or "" for the outbox page).
type writesView struct {
	Page page
	Rows any // a UIOutboxOpen or UIOutboxOfEntry page
	Back string
}
