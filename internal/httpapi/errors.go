package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/outbound"
)

// retryAfter is the Retry-After of a request refused over a limit: a
// stream over max_streams_per_token, max_streams_per_thread or
// max_streams (streams are freed only as pages leave, so asking sooner is
// pointless; it is also where the browser client's backoff tops out), a
// client tool call over max_pending_per_thread, max_pending_per_user or
// max_pending (freed as pages answer and callers leave), or a new MCP
// session over max_sessions_per_caller or max_sessions (freed as sessions
// end).
const retryAfter = "10"

// StatusOf maps a caller's mistake, an error of the gateway's Invoke,
// Status or Resume, to its HTTP status.
func StatusOf(err error) int {
	switch {
	case errors.Is(err, gateway.ErrUnknownTool), errors.Is(err, gateway.ErrUnknownCall):
		return http.StatusNotFound
	case errors.Is(err, gateway.ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, gateway.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, gateway.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, gateway.ErrReuse):
		return http.StatusUnprocessableEntity
	case errors.Is(err, gateway.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, gateway.ErrTooMany):
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// writeAnswer writes an answer, or a caller's mistake as its status.
// Only a caller's mistake (a gateway.RequestError) is told as it is; any
// other error may name a file, a key or a user, so it is logged and the
// answer says only that it happened.
func (a *API) writeAnswer(w http.ResponseWriter, ans *gateway.Answer, err error) {
	if err != nil {
		var re *gateway.RequestError
		if errors.As(err, &re) {
			status := StatusOf(err)
			if re.RetryAfter > 0 {
				// A quota says when its window lets the next call in.
				var e apiError
				e.Error.Code, e.Error.Message, e.Error.Limit = re.Code, err.Error(), re.Limit
				e.Error.RetryAfter = int64(re.RetryAfter / time.Second)
				w.Header().Set("Retry-After", strconv.FormatInt(e.Error.RetryAfter, 10))
				writeJSON(w, status, e)
				return
			}
			if status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", retryAfter)
			}
			writeError(w, status, re.Code, err.Error())
			return
		}
		a.internal(w, "answering a call", err)
		return
	}
	bp := buffers.Get().(*[]byte)
	b := ans.AppendJSON((*bp)[:0])
	// One array for both values, as gateway's send does for its headers.
	v := []string{"application/json", strconv.Itoa(len(b))}
	h := w.Header()
	h["Content-Type"] = v[0:1:1]
	h["Content-Length"] = v[1:2:2]
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	// A writer does not keep what it was given.
	putBuffer(bp, b)
}

// internal answers an error that is not the caller's: logged, and told
// only that it happened (gateway.Told).
func (a *API) internal(w http.ResponseWriter, doing string, err error) {
	msg, logIt := gateway.Told(err)
	if logIt {
		a.logger.Error(doing, zap.Error(err))
	}
	writeError(w, http.StatusInternalServerError, "internal", msg)
}

// buffers hold request bodies being decoded and answers being written;
// most fit in 4 KiB.
var buffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 4<<10)
	return &b
}}

// putBuffer returns b, got from buffers as bp, for reuse; a buffer grown
// past 64 KiB by an unusually large body is left to the collector.
func putBuffer(bp *[]byte, b []byte) {
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		buffers.Put(bp)
	}
}

// bodyOptions make request bodies strict: unknown and repeated members are
// refused, names match exactly. Invalid UTF-8 becomes U+FFFD, as a page's
// JSON.stringify may escape a lone surrogate.
var bodyOptions = json.JoinOptions(json.RejectUnknownMembers(true), jsontext.AllowInvalidUTF8(true))

// decodeBody reads a strict JSON object body, sent as application/json,
// within the request size limit; it writes the refusal itself and reports
// false. The body is read whole into a pooled buffer first: decoding from
// a stream reads it in small pieces through every layer of readers.
func (a *API) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if !requireJSON(w, r) {
		return false
	}
	body, bp, err := a.readBody(w, r)
	if err == nil {
		err = json.Unmarshal(body, v, bodyOptions)
	}
	// Nothing decoded keeps body's bytes (v2 copies into jsontext.Value
	// and jsontext.Value): the buffer can go back.
	putBuffer(bp, body)
	switch {
	case err == nil:
		return true
	case a.tooLarge(w, err):
		return false
	}
	writeError(w, http.StatusBadRequest, "malformed_envelope", "the body is not the expected JSON object: "+err.Error())
	return false
}

// readBody reads a request body whole, within the request size limit,
// into a pooled buffer: body, in bp, goes back with putBuffer once
// nothing uses it. Over the limit, the error is an *http.MaxBytesError
// (see tooLarge).
func (a *API) readBody(w http.ResponseWriter, r *http.Request) (body []byte, bp *[]byte, err error) {
	limit := a.maxRequest
	bp = buffers.Get().(*[]byte)
	body, err = outbound.ReadAll(http.MaxBytesReader(w, r.Body, limit), (*bp)[:0], min(r.ContentLength, limit))
	return body, bp, err
}

// tooLarge answers 413 and reports true when err is a body over the
// request size limit.
func (a *API) tooLarge(w http.ResponseWriter, err error) bool {
	var tooBig *http.MaxBytesError
	if !errors.As(err, &tooBig) {
		return false
	}
	a.refused(observe.RefusedLimits, "too_large")
	writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the request is larger than %d bytes", a.maxRequest))
	return true
}

// refused counts and logs a request turned away for one of observe's
// Refused reasons; code is the error code the caller is told.
func (a *API) refused(reason, code string) {
	a.obs.Refused(reason)
	observe.LogRefusal(a.logger, reason, code)
}

// methodNotAllowed answers a known path asked with another method.
func methodNotAllowed(w http.ResponseWriter, method string) {
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("use %s", method))
}

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		// Limit and RetryAfter (seconds) are set for a call over a quota.
		Limit      string `json:"limit,omitempty"`
		RetryAfter int64  `json:"retryAfter,omitzero"`
	} `json:"error"`
}

// writeError writes a caller's mistake: {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v, jsonread.Legacy)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"the answer could not be encoded"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
