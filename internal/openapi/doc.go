// Package openapi turns an OpenAPI document's operations into toolgate tools.
package openapi
