package ledger

import stdjson "encoding/json"

// inputNumber is a number of a decoded call input: encoding/json's Number,
// the text of the number as written. The gateway decodes inputs into it
// because the schema validator (santhosh-tekuri/jsonschema) and the
// reference resolver take that type; InputDigest writes it as its text.
// This is the one place the package names encoding/json.
type inputNumber = stdjson.Number
