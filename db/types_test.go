package db_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gitlease/gitlease/db/dbtest"
)

// TestUUIDsAreSentAsTheirBytes: on gitlease's connections a uuid.UUID
// parameter, by value or by pointer (nil as NULL), is encoded straight as
// its 16 bytes, not by way of its text and the driver.Valuer detour, and
// reaches the database unchanged.
func TestUUIDsAreSentAsTheirBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	plan := conn.Conn().TypeMap().PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, uuid.UUID{})
	if got := fmt.Sprintf("%T", plan); got != "*db.uuidBytes" {
		t.Errorf("a uuid.UUID is encoded by %s, want db's 16-byte plan", got)
	}

	id := uuid.New()
	var nilID *uuid.UUID
	for _, tc := range []struct {
		name  string
		param any
		want  string
	}{
		{"value", id, id.String()},
		{"pointer", &id, id.String()},
		{"nil pointer", nilID, "NULL"},
	} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT coalesce($1::uuid::text, 'NULL')", tc.param).Scan(&got); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: the database got %s, want %s", tc.name, got, tc.want)
		}
	}
}
