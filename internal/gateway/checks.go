package gateway

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxIdentityLen bounds identity.user and identity.install, in bytes. Both
// are part of every ledger key (with the call id): unbounded, one caller's
// 40,000-byte user made a key bbolt cannot hold, and the ledger could not
// be opened again.
const MaxIdentityLen = 256

// MaxCallIDLen bounds a call id, in bytes.
const MaxCallIDLen = 128

// CheckIdentity checks that the user and installation a caller names are
// at most MaxIdentityLen bytes of valid UTF-8 without control characters
// (C0, DEL and C1). Control characters are refused because the ledger
// joins user, installation and call id with one (\x1f): a user holding it
// could name another caller's calls. Either may be empty.
func CheckIdentity(id Identity) error {
	if err := checkIdentityPart(id.User); err != nil {
		return badRequest("invalid_identity", "identity.user %v", err)
	}
	if err := checkIdentityPart(id.Install); err != nil {
		return badRequest("invalid_identity", "identity.install %v", err)
	}
	return nil
}

func checkIdentityPart(s string) error {
	if len(s) > MaxIdentityLen {
		return fmt.Errorf("is %d bytes long; at most %d are allowed", len(s), MaxIdentityLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("holds the control character %U at byte %d", r, i)
		}
	}
	return nil
}

// CheckCallID checks a call id a caller names: 1 to MaxCallIDLen bytes of
// [A-Za-z0-9_.:-], and not "." or "..". Every front end names calls in
// URL paths (/calls/{callId}, /client/calls/{callId}/claim), so an id
// holding "/" or a dot segment is one no later request could reach: its
// call could never be looked up, claimed or resumed.
func CheckCallID(id string) error {
	if id == "" || len(id) > MaxCallIDLen {
		return badRequest("invalid_call_id", "callId must be 1 to %d bytes long", MaxCallIDLen)
	}
	if id == "." || id == ".." {
		return badRequest("invalid_call_id", "callId must not be %q", id)
	}
	for i := 0; i < len(id); i++ {
		if !callIDByte(id[i]) {
			return badRequest("invalid_call_id", "callId may hold only letters, digits and _ . : - (byte %d is %q)", i, id[i])
		}
	}
	return nil
}

func callIDByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c == ':' || c == '-'
}
