package docs

import _ "embed"

// OpenAPI is openapi.json byte for byte: the OpenAPI 3.1 document of every
// route `callscribe serve` mounts, which serve answers GET /openapi.json
// with.
//
//go:embed openapi.json
var OpenAPI []byte
