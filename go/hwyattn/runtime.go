// SPDX-License-Identifier: Apache-2.0

package hwyattn

// #include "shim.h"
import "C"

// Version is the library's version, e.g. "0.4.0".
func Version() string { return C.GoString(C.hwyattn_version()) }

// ABIVersion is the library's HWYATTN_ABI_VERSION. It equals HeaderABIVersion
// unless the program runs against a library built from an incompatible
// header.
func ABIVersion() uint32 { return uint32(C.hwyattn_abi_version()) }

// HeaderABIVersion is the HWYATTN_ABI_VERSION of the hwyattn.h this package
// was compiled against.
const HeaderABIVersion = uint32(C.HWYATTN_ABI_VERSION)

// SIMDTarget is the SIMD target the kernels run on ("AVX3", "AVX2", "SSE4",
// "NEON", "EMU128", ...). The environment variable HWYATTN_TARGET, read at
// the first call, caps it.
func SIMDTarget() string { return C.GoString(C.hwyattn_simd_target()) }

// SetNumThreads sets the number of threads later calls may use: 1 = the
// calling thread only; 0 = all cores (OMP_NUM_THREADS honoured).
// Process-wide. Results are bit-identical for any thread count.
func SetNumThreads(n int) error {
	if n < -1<<31 || n > 1<<31-1 {
		return invalidf("n: %d threads; out of range", n)
	}
	var msg [errorBufferSize]C.char
	return statusError(C.hwyattn_go_set_num_threads(C.int(n), &msg[0], C.size_t(len(msg))), &msg)
}

// NumThreads is the number of threads later calls may use.
func NumThreads() int { return int(C.hwyattn_get_num_threads()) }
