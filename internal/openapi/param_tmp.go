package openapi

// Param (temporary: style.go defines it).
type Param struct {
	Name          string
	In            string
	Style         string
	Explode       *bool
	AllowReserved bool
}

func (p Param) Check() error { return nil }
