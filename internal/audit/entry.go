// Package audit keeps the audit trail: every call's life as JSON lines,
// each carrying the SHA-256 of the line before it.
package audit

import (
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Entry is one line of the trail.
type Entry struct {
	Time       time.Time      `json:"time"`
	Event      string         `json:"event"`
	CallID     string         `json:"callId,omitempty"`
	Tool       string         `json:"tool,omitempty"`
	User       string         `json:"user,omitempty"`
	Install    string         `json:"install,omitempty"`
	Surface    string         `json:"surface,omitempty"`
	ThreadID   string         `json:"threadId,omitempty"`
	Decision   string         `json:"decision,omitempty"`
	Limit      string         `json:"limit,omitempty"`
	By         string         `json:"by,omitempty"`
	Device     string         `json:"device,omitempty"`
	Target     string         `json:"target,omitempty"`
	Outcome    string         `json:"outcome,omitempty"`
	Status     int            `json:"status,omitzero"`
	DurationMS float64        `json:"durationMs,omitzero"`
	Input      jsontext.Value `json:"input,omitempty"`
	Prev       string         `json:"prev"`
}

// Events.
const (
	EventCall            = "call"
	EventRefused         = "refused"
	EventApprovalAsked   = "approval_asked"
	EventApprovalDecided = "approval_decided"
	EventResumed         = "resumed"
)
