// Package jsonread reads one JSON value from bytes token by token, as the
// hot path does for tool inputs and upstream answers, with decoders kept
// in a pool between calls. It also holds what reading and writing JSON as
// encoding/json did takes on json (go-json-experiment): its Number type
// behind one alias, and the option sets and reader for the readers and
// outputs first written on it (docs/architecture.md, JSON).
package jsonread

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// ErrTrailing is returned when something other than white space follows
// the value.
var ErrTrailing = errors.New("invalid character after top-level value")

// reader is a pooled decoder and the buffer it reads: a *bytes.Buffer
// lets jsontext parse the caller's bytes in place instead of copying them.
type reader struct {
	src bytes.Buffer
	dec jsontext.Decoder
}

var readers = sync.Pool{New: func() any { return new(reader) }}

// One calls read with a decoder over data, configured by opts. read
// decodes one value; anything but white space after it is ErrTrailing. An
// error from read is returned as it is. The decoder must not be kept after
// read returns.
func One(data []byte, read func(*jsontext.Decoder) error, opts ...jsontext.Options) error {
	r := readers.Get().(*reader)
	defer func() {
		// Let go of data: the decoder aliases the buffer's bytes.
		r.src = bytes.Buffer{}
		r.dec.Reset(&r.src)
		readers.Put(r)
	}()
	r.src = *bytes.NewBuffer(data)
	r.dec.Reset(&r.src, opts...)
	if err := read(&r.dec); err != nil {
		return err
	}
	if _, err := r.dec.ReadToken(); err != io.EOF {
		return ErrTrailing
	}
	return nil
}
