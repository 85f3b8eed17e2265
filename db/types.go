package db

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// AfterConnect prepares a new connection's type map for gitlease's
// values; it is a pgxpool.Config.AfterConnect, set on serve's pools (every
// command's), the tests' (db/dbtest) and the River comparison's (bench).
//
// pgx encodes a github.com/google/uuid UUID, which implements
// driver.Valuer, by its Value: the 36-character text, which the uuid codec
// does not take in binary, so pgx fails once, parses the text back and
// encodes the bytes — three passes and an error for every ID sent (its
// cost is in docs/benchmarks-history.md). A UUID is the 16 bytes it is
// made of: it is encoded as those.
func AfterConnect(_ context.Context, conn *pgx.Conn) error {
	m := conn.TypeMap()
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUID}, m.TryWrapEncodePlanFuncs...)
	return nil
}

func tryWrapUUID(value any) (plan pgtype.WrappedEncodePlanNextSetter, nextValue any, ok bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &uuidBytes{}, [16]byte(u), true
	}
	return nil, nil, false
}

// uuidBytes encodes a uuid.UUID as its [16]byte.
type uuidBytes struct{ next pgtype.EncodePlan }

func (p *uuidBytes) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidBytes) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode([16]byte(value.(uuid.UUID)), buf)
}
