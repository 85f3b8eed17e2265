// Package dbq is the sqlc-generated code of db/queries/*.sql over the
// schema of db/migrations; `make generate` writes every file here but this
// one, and `make test` checks they are current. Each query file is the
// owner's of the table it writes (README.md's layout); ui.sql holds the
// dashboard's read-only queries.
package dbq
