package verify

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// CheckSecureURL accepts an absolute https URL, or an http one to a
// loopback host: keys, issuers and resources named in the clear could be
// swapped on the way, and with swapped keys any token verifies. A URL
// with a user or password is refused too: it would be logged and sent.
func CheckSecureURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("%q is not an absolute URL", raw)
	case u.User != nil:
		return fmt.Errorf("%q carries a user or password", u.Redacted())
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && IsLoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q must be an https URL (http only to localhost, 127.0.0.0/8 or ::1)", raw)
}

// IsLoopbackHost reports whether host (a name or an IP, without port) is
// this machine's loopback: localhost, 127.0.0.0/8 or ::1. An empty host,
// which listens on every interface, is not.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	// netip, not net.ParseIP: it does not allocate, and this runs on every
	// runtime call without callers. A zoned address is no host name.
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}
