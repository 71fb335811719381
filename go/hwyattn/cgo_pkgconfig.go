// SPDX-License-Identifier: Apache-2.0

//go:build hwyattn_pkgconfig

package hwyattn

// With -tags hwyattn_pkgconfig the flags come from `pkg-config --cflags
// --libs hwyattn` (set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig for an install
// outside the default search path).

// #cgo pkg-config: hwyattn
import "C"
