package identity

import (
	"crypto"
	"errors"

	"github.com/go-jose/go-jose/v4"
)

// DecodeJWK is the KeyDecoder (verify.KeyDecoder) the gateway reads other
// issuers' key sets with: go-jose reads the key material and refuses what
// it knows to be unsafe (a point off its curve, an Ed25519 low-order
// point, an RSA modulus over 4096 bits, an x5c certificate of another
// key). It is called only on members verify.ParseJWKS has checked: go-jose
// is unsafe on a key with private members, which ParseJWKS refuses first.
func DecodeJWK(raw []byte) (crypto.PublicKey, error) {
	var jk jose.JSONWebKey
	if err := jk.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if !jk.Valid() || !jk.IsPublic() {
		return nil, errors.New("not a public key")
	}
	return jk.Key, nil
}
