#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Test install.pkgconfig: build the consumer with the compiler and flags from
# pkg-config, as a Makefile user would:
#   cc consumer.c $(pkg-config --cflags --libs hwyattn)
# against a COPY of the installed prefix placed elsewhere (hwyattn.pc derives its
# prefix from its own location), then run it. Then link statically from a copy
# holding only libhwyattn.a, with $(pkg-config --static --libs hwyattn).
# The variable openmp must say how the library was built (ON|OFF), and
# --static --libs carry -fopenmp exactly when it is ON.
# Usage: check_pkgconfig.sh <prefix> <workdir> <libdir-rel> <cc> <consumer.c> [pkg-config] [version]
#                           [ON|OFF]
set -euo pipefail
prefix=$1 work=$2 libdir_rel=$3 cc=$4 src=$5 pkgconfig=${6:-pkg-config} version=${7:-} openmp=${8:-}
fail() { echo "FAILED: $*" >&2; exit 1; }
say() { printf '$ %s\n' "$*"; }

rm -rf "$work"
mkdir -p "$work"

# --- shared, from a relocated copy --------------------------------------------
moved="$work/relocated prefix"   # a space, to catch unquoted paths
cp -a "$prefix" "$moved"
export PKG_CONFIG_PATH="$moved/$libdir_rel/pkgconfig"
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR || true
say "PKG_CONFIG_PATH=$PKG_CONFIG_PATH"

got_version=$("$pkgconfig" --modversion hwyattn) || fail "pkg-config cannot find hwyattn"
echo "pkg-config --modversion hwyattn: $got_version"
[[ -z "$version" || "$got_version" == "$version" ]] || fail "version $got_version, expected $version"
"$pkgconfig" --print-errors --exists 'hwyattn >= 0.1' || fail "hwyattn >= 0.1 not satisfied"
libdir=$("$pkgconfig" --variable=libdir hwyattn)
libdir=${libdir//\\ / }   # pkgconf escapes spaces
echo "libdir: $libdir"
# pkgconf may print a normalised path; compare the real paths.
[[ "$(cd "$libdir" && pwd -P)" == "$(cd "$moved/$libdir_rel" && pwd -P)" ]] ||
  fail "libdir $libdir is not inside the relocated prefix"

# Paths with spaces come back escaped ("\ "); let the shell undo that with eval.
cflags=$("$pkgconfig" --cflags hwyattn)
libs=$("$pkgconfig" --libs hwyattn)
echo "--cflags: $cflags"
echo "--libs:   $libs"
cmd="\"$cc\" -std=c99 -Wall -Wextra -pedantic -Werror \"$src\" $cflags $libs -lm -o \"$work/consumer_shared\""
say "$cmd"
eval "$cmd"
say "LD_LIBRARY_PATH=$libdir $work/consumer_shared"
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/consumer_shared"

# --- static, from a copy without the shared library ---------------------------
static="$work/static-prefix"
cp -a "$prefix" "$static"
rm -f "$static/$libdir_rel"/libhwyattn.so*
export PKG_CONFIG_PATH="$static/$libdir_rel/pkgconfig"
libs_static=$("$pkgconfig" --static --libs hwyattn)
echo "--static --libs: $libs_static"
got_openmp=$("$pkgconfig" --variable=openmp hwyattn)
echo "--variable=openmp: $got_openmp"
[[ "$got_openmp" == ON || "$got_openmp" == OFF ]] || fail "openmp is '$got_openmp', expected ON or OFF"
[[ -z "$openmp" || "$got_openmp" == "$openmp" ]] || fail "openmp is $got_openmp but the build has $openmp"
if [[ "$got_openmp" == ON ]]; then
  [[ "$libs_static" == *openmp* ]] || fail "openmp=ON but --static --libs has no OpenMP flag"
else
  [[ "$libs_static" != *openmp* ]] || fail "openmp=OFF but --static --libs asks for OpenMP"
fi
cmd="\"$cc\" -std=c99 -Wall -Wextra -pedantic -Werror \"$src\" $("$pkgconfig" --cflags hwyattn) $libs_static -o \"$work/consumer_static\""
say "$cmd"
eval "$cmd"
if readelf -d "$work/consumer_static" 2>/dev/null | grep -q 'libhwyattn\.so'; then
  fail "static consumer needs libhwyattn.so"
fi
if [[ "$got_openmp" == OFF ]] &&
   readelf -d "$work/consumer_static" 2>/dev/null | grep -q -E 'lib(gomp|omp|iomp5)\.so'; then
  fail "static consumer of an openmp=OFF build needs an OpenMP runtime"
fi
say "$work/consumer_static"
"$work/consumer_static"
echo "pkg-config OK"
