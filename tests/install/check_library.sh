#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Test install.library: the installed shared library exports only the C ABI
# (hwyattn_*), carries SONAME libhwyattn.so.<ABI>, and the usual symlink chain
# libhwyattn.so -> libhwyattn.so.<ABI> -> libhwyattn.so.<VERSION> is in place,
# and it needs an OpenMP runtime exactly when built with HWYATTN_OPENMP=ON.
# Usage: check_library.sh <libdir> <version> <abi> [nm] [readelf] [ON|OFF]
set -euo pipefail
libdir=$1 version=$2 abi=$3 nm=${4:-nm} readelf=${5:-readelf} openmp=${6:-}
real="$libdir/libhwyattn.so.$version"
fail() { echo "FAILED: $*" >&2; exit 1; }

[[ -f "$real" && ! -L "$real" ]] || fail "$real is not a regular file"
[[ "$(readlink "$libdir/libhwyattn.so.$abi")" == "libhwyattn.so.$version" ]] ||
  fail "libhwyattn.so.$abi does not point to libhwyattn.so.$version"
[[ "$(readlink "$libdir/libhwyattn.so")" == "libhwyattn.so.$abi" ]] ||
  fail "libhwyattn.so does not point to libhwyattn.so.$abi"

soname=$("$readelf" -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
echo "SONAME: $soname"
[[ "$soname" == "libhwyattn.so.$abi" ]] || fail "SONAME is '$soname', expected libhwyattn.so.$abi"

# Defined dynamic symbols, without the version suffix (@@HWYATTN_1).
syms=$("$nm" -D --defined-only "$real" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
count=$(grep -c . <<<"$syms" || true)
echo "$count defined dynamic symbols:"
sed 's/^/  /' <<<"$syms"
# The version script may add the version node itself (HWYATTN_1) as an absolute symbol.
others=$(grep -v -E '^hwyattn_[A-Za-z0-9_]+$' <<<"$syms" | grep -v -E '^HWYATTN_[0-9]+$' || true)
[[ -z "$others" ]] || fail "symbols outside hwyattn_* are exported: $(tr '\n' ' ' <<<"$others")"
for s in hwyattn_version hwyattn_abi_version hwyattn_sdpa hwyattn_simd_target \
         hwyattn_set_num_threads hwyattn_last_error hwyattn_tensor_contiguous; do
  grep -qx "$s" <<<"$syms" || fail "$s is not exported"
done

# No RPATH/RUNPATH into the build tree may leak into the installed library.
if "$readelf" -d "$real" | grep -E '\((RPATH|RUNPATH)\)'; then
  fail "installed library carries an RPATH/RUNPATH"
fi
needed=$("$readelf" -d "$real" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p' | tr '\n' ' ')
echo "NEEDED: $needed"
# libgomp (GCC), libomp (LLVM), libiomp5 (Intel).
omp_runtime=$(grep -o -E 'lib(gomp|omp|iomp5)\.so[^ ]*' <<<"$needed" || true)
case "$openmp" in
  ON) [[ -n "$omp_runtime" ]] || fail "built with HWYATTN_OPENMP=ON but no OpenMP runtime is NEEDED" ;;
  OFF) [[ -z "$omp_runtime" ]] || fail "built with HWYATTN_OPENMP=OFF but $omp_runtime is NEEDED" ;;
  "") ;;
  *) fail "the OpenMP argument is '$openmp', expected ON or OFF" ;;
esac
echo "OpenMP ${openmp:-not checked}: ${omp_runtime:-no OpenMP runtime}"
echo "library OK"
