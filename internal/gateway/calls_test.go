package gateway

import (
	"bytes"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonread/legacyjson"
	"github.com/toolgate/toolgate/internal/result"
)

// TestCheckCardWritesAsBefore: the card the ledger keeps is written as
// encoding/json wrote it, <, > and & escaped and invalid UTF-8 as U+FFFD,
// since an answer copies those bytes as they are.
func TestCheckCardWritesAsBefore(t *testing.T) {
	body := []byte("{\"type\":\"action_required\",\"title\":\"<b>&amp; \xff \u2028\",\"elements\":[{\"type\":\"button\",\"id\":\"ok\",\"label\":\"OK\",\"input\":{\"a\": [1, 2]}}]}")
	got, err := checkCard(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	card, err := result.ParseCard(body)
	if err != nil {
		t.Fatal(err)
	}
	want, err := legacyjson.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("checkCard wrote\n%s\nencoding/json wrote\n%s", got, want)
	}
}
