// SPDX-License-Identifier: Apache-2.0

//go:build !hwyattn_pkgconfig

package hwyattn

// The default way to link: -lhwyattn, with the header and the library found
// on the compiler's and linker's default paths (an install into /usr/local
// or /usr), or wherever CGO_CFLAGS (-I<prefix>/include) and CGO_LDFLAGS
// (-L<prefix>/lib) point. Build with -tags hwyattn_pkgconfig to ask
// pkg-config instead (cgo_pkgconfig.go).

// #cgo LDFLAGS: -lhwyattn
import "C"
