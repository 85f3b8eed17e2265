package db_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// owners maps each query file to the tables its package owns (SPEC §2):
// only the owner's queries write a table or read it whole (SELECT *,
// RETURNING *, sqlc.embed), so a column change touches one package. The
// dashboard's ui.sql owns nothing and names every column it reads; its
// ui_sessions.sql owns the dashboard's own session state.
var owners = map[string][]string{
	"work_items.sql":          {"work_items", "work_item_audit", "subject_generations", "lease_installations", "work_item_endings"}, // queue
	"deliveries.sql":          {"deliveries"},                                                                                       // webhook
	"outbox.sql":              {"outbox", "github_items"},                                                                           // app/outbox
	"github_items.sql":        {"outbox", "github_items"},                                                                           // app/outbox
	"redeliveries.sql":        {"redeliveries", "redelivery_scans"},                                                                 // app/redeliver
	"ui.sql":                  nil,                                                                                                  // app/ui, read-only
	"server.sql":              nil,                                                                                                  // db: the server's settings, no table
	"ui_sessions.sql":         {"ui_signed_out", "ui_login_failures"},                                                               // app/ui
	"lease_installations.sql": {"work_items", "lease_installations", "work_item_lease_fair"},                                        // queue
	"github_budgets.sql":      {"github_budgets"},                                                                                   // app/github
}

var (
	writeRE  = regexp.MustCompile(`(?i)\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)`)
	starRE   = regexp.MustCompile(`(?i)\bSELECT\s+\*\s+FROM\s+(\w+)`)
	returnRE = regexp.MustCompile(`(?i)\bRETURNING\s+\*`)
	embedRE  = regexp.MustCompile(`sqlc\.embed\((\w+)\)`)
	commentR = regexp.MustCompile(`--[^\n]*`)
	// ON CONFLICT … DO UPDATE and FOR [NO KEY] UPDATE lock or upsert the
	// statement's own table: they are not writes of another.
	notWrite = regexp.MustCompile(`(?i)\b(?:DO|FOR(?:\s+NO\s+KEY)?)\s+UPDATE\b`)
)

func TestTablesAreWrittenAndReadWholeOnlyByTheirOwner(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("queries", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("query files: %v %v", files, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		owned, known := owners[name]
		if !known {
			t.Errorf("%s: a query file without an owner in this test's table", name)
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range strings.Split(string(b), "-- name: ") {
			query, _, _ := strings.Cut(stmt, " ")
			sql := notWrite.ReplaceAllString(commentR.ReplaceAllString(stmt, ""), "")
			var touched []string
			for _, m := range writeRE.FindAllStringSubmatch(sql, -1) {
				touched = append(touched, m[1])
			}
			if returnRE.MatchString(sql) && len(touched) == 0 {
				t.Errorf("%s %s: RETURNING * of no written table", name, query)
			}
			for _, m := range starRE.FindAllStringSubmatch(sql, -1) {
				touched = append(touched, m[1])
			}
			for _, m := range embedRE.FindAllStringSubmatch(sql, -1) {
				alias := regexp.MustCompile(`(?i)\b(?:FROM|JOIN)\s+(\w+)\s+(?:AS\s+)?` + m[1] + `\b`).FindStringSubmatch(sql)
				if alias == nil {
					t.Errorf("%s %s: sqlc.embed(%s) of an unknown alias", name, query, m[1])
					continue
				}
				touched = append(touched, alias[1])
			}
			for _, table := range touched {
				if !contains(owned, strings.ToLower(table)) {
					t.Errorf("%s %s writes or reads all of %s, which its package does not own", name, query, table)
				}
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// callers maps each query file to the one package whose code (tests aside)
// calls its queries.
var callers = map[string]string{
	"work_items.sql":          "queue",
	"deliveries.sql":          "webhook",
	"outbox.sql":              "app/outbox",
	"github_items.sql":        "app/outbox",
	"redeliveries.sql":        "app/redeliver",
	"ui.sql":                  "app/ui",
	"server.sql":              "db",
	"ui_sessions.sql":         "app/ui",
	"lease_installations.sql": "queue",
	"github_budgets.sql":      "app/github",
}

func TestQueriesAreCalledOnlyByTheirPackage(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join("queries", "*.sql"))
	nameRE := regexp.MustCompile(`-- name: (\w+)`)
	pkgOf := map[string]string{} // query → package
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range nameRE.FindAllStringSubmatch(string(b), -1) {
			pkgOf[m[1]] = callers[filepath.Base(f)]
		}
	}
	callRE := regexp.MustCompile(`\.([A-Z]\w*)\(`)
	root := ".."
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "db", "bench", "tools", "docs", "testdata", "scripts", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, m := range callRE.FindAllStringSubmatch(string(b), -1) {
			if want, ok := pkgOf[m[1]]; ok && want != pkg {
				t.Errorf("%s calls %s, a query of %s", rel, m[1], want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
