package auth

import "fmt"

// Role is what an account may do. Roles are ordered: each includes the
// ones below it.
type Role int

// The roles, lowest first. Public marks routes that need no session (it is
// nobody's role).
const (
	Public Role = iota
	Viewer
	Operator
	Admin
)

var roleNames = map[Role]string{Public: "public", Viewer: "viewer", Operator: "operator", Admin: "admin"}

// String returns the role's name as stored in switchyard.users.
func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole parses an account's role: viewer, operator or admin.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s && r != Public {
			return r, nil
		}
	}
	return 0, fmt.Errorf("auth: unknown role %q: want viewer, operator or admin", s)
}

// Allows reports whether an account with role r may use something that
// needs at least need.
func (r Role) Allows(need Role) bool { return r >= need }
