package dbq

// Deref is the value of a nullable column (*p), or T's zero value for NULL
// (nil). It is the one such helper: the generated types carry a nullable
// column as a pointer. Its counterpart, a pointer to a value, is new(v).
func Deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
