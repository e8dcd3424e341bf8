package dispatch

import (
	"errors"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Why a value may not stand in a path segment. Each names the rule, never
// the value: a path may hold an ${env.NAME} secret.
var (
	errSegmentEmpty = errors.New(`a path segment value may not be empty or blank (a path reference must stay in its segment)`)
	errSegmentDots  = errors.New(`a path segment value may not be a dot segment such as "." or ".." (a path reference must stay in its segment)`)
	errSegmentSep   = errors.New(`a path segment value may not hold "/", "\" or a control character, nor their percent-encodings (a path reference must stay in its segment)`)
	errSegmentUTF8  = errors.New(`a path segment value must be valid UTF-8, also once percent-decoded (a path reference must stay in its segment)`)
)

// escapeSegment encodes text as (part of) one path segment, after
// checkSegment found nothing in it that a server could read as a separator
// or a dot segment.
func escapeSegment(s string) (string, error) {
	if err := checkSegment(s); err != nil {
		return "", err
	}
	return url.PathEscape(s), nil
}

// checkSegment refuses a value that some server on the way could read as
// more than one segment, or as a climb. Encoding the value (url.PathEscape)
// is enough for a server that decodes a path once, after splitting it; the
// rules below are for the others, which are common enough behind proxies:
//
//   - Percent-decoding is applied until nothing changes: the value is
//     escaped once more when sent ("%2f" goes out as "%252f"), but a proxy
//     and a framework that each decode once turn that back into "/". A "%"
//     that starts no escape ("100%") is text and stays.
//   - IIS also decodes %uXXXX, so "%u002e%u002e" is "..".
//   - Invalid UTF-8 is refused after decoding: overlong forms such as
//     "%c0%af" were read as "/" by older servers.
//   - NFKC-normalizing servers read "／" (U+FF0F) as "/" and "‥" (U+2025)
//     as "..", so the checks run on the NFKC form too.
//   - Tomcat and Jetty strip ";params" from a segment, so "..;x" is "..".
//   - Windows drops trailing dots and spaces from a name, so "... " and
//     ". ." read as "." or ".."; any value of dots and spaces alone is
//     refused, and so is an empty one, which would route "/users//orders"
//     or "/users/" elsewhere.
//
// Numbers, booleans and JSON text without these characters pass.
func checkSegment(s string) error {
	if strings.TrimSpace(s) == "" {
		return errSegmentEmpty
	}
	if hasSeparator(s) {
		return errSegmentSep
	}
	if !utf8.ValidString(s) {
		return errSegmentUTF8
	}
	d := unescapeAll(s)
	if !utf8.ValidString(d) {
		return errSegmentUTF8
	}
	if hasSeparator(d) {
		return errSegmentSep
	}
	nf := norm.NFKC.String(d)
	if hasSeparator(nf) {
		return errSegmentSep
	}
	if dotsOnly(d, true) || dotsOnly(nf, true) {
		return errSegmentDots
	}
	return nil
}

func hasSeparator(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return r == '/' || r == '\\' || unicode.IsControl(r)
	})
}

// dotsOnly reports whether the decoded segment seg, read up to a ';', is
// dots and spaces alone. With blank, a segment of spaces alone (or none)
// counts too; without it, at least one dot must be there, so that an
// author's empty segment ("/a//b", "/items/") is still theirs to write.
func dotsOnly(seg string, blank bool) bool {
	seg, _, _ = strings.Cut(seg, ";")
	if strings.Trim(seg, ". ") != "" {
		return false
	}
	return blank || strings.Contains(seg, ".")
}

// isDotSegment reports whether an escaped path segment, decoded as far as
// any server would, reads as a dot segment.
func isDotSegment(escaped string) bool {
	d := unescapeAll(escaped)
	return dotsOnly(d, false) || dotsOnly(norm.NFKC.String(d), false)
}

// unescapeAll percent-decodes s until nothing changes. Each round that
// changes s makes it shorter, so it ends within len(s)/3 rounds.
func unescapeAll(s string) string {
	for strings.Contains(s, "%") {
		d := unescapeOnce(s)
		if d == s {
			break
		}
		s = d
	}
	return s
}

// unescapeOnce decodes each %XX and %uXXXX in s and leaves every other
// byte, a stray "%" too, as it is.
func unescapeOnce(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
				i += 2
				continue
			}
			if i+5 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U') && isHex(s[i+2]) && isHex(s[i+3]) && isHex(s[i+4]) && isHex(s[i+5]) {
				r := rune(unhex(s[i+2]))<<12 | rune(unhex(s[i+3]))<<8 | rune(unhex(s[i+4]))<<4 | rune(unhex(s[i+5]))
				b.WriteRune(r)
				i += 5
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
