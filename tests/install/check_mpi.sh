#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Test install.mpi (HWYATTN_MPI=ON builds): the installed libhwyattn_mpi, used
# the two ways a downstream project would, each program then run on 2 ranks:
#   1. cc consumer_mpi.c $(pkg-config --cflags --libs hwyattn_mpi), from a copy
#      of the prefix moved elsewhere (relocatable .pc; MPI's flags come with it);
#   2. find_package(hwyattn CONFIG COMPONENTS mpi) -> hwyattn::hwyattn_mpi.
# Also: libhwyattn.so itself needs no MPI library; libhwyattn_mpi.so exports
# only hwyattn_mpi_*.
# Usage: check_mpi.sh <prefix> <workdir> <libdir-rel> <cc> <consumer_mpi dir> <pkg-config>
#                     <cmake> <mpiexec> [mpiexec flags...]
set -euo pipefail
prefix=$1 work=$2 libdir_rel=$3 cc=$4 src=$5 pkgconfig=$6 cmake=$7 mpiexec=$8
shift 8
fail() { echo "FAILED: $*" >&2; exit 1; }
say() { printf '$ %s\n' "$*"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

rm -rf "$work"
mkdir -p "$work"
lib="$prefix/$libdir_rel"
if readelf -d "$lib/libhwyattn.so" | grep -q 'libmpi'; then
  fail "libhwyattn.so needs an MPI library"
fi
exported=$(nm -D --defined-only "$lib/libhwyattn_mpi.so" | awk '$2 ~ /^[TDRBW]$/ {print $3}')
echo "libhwyattn_mpi.so exports: $exported"
others=$(grep -v '^hwyattn_mpi_' <<<"$exported" || true)
[[ -z "$others" ]] || fail "libhwyattn_mpi.so exports more than hwyattn_mpi_*: $others"

moved="$work/relocated prefix"
cp -a "$prefix" "$moved"
export PKG_CONFIG_PATH="$moved/$libdir_rel/pkgconfig"
cflags=$("$pkgconfig" --cflags hwyattn_mpi) || fail "pkg-config cannot find hwyattn_mpi"
libs=$("$pkgconfig" --libs hwyattn_mpi)
echo "--cflags: $cflags"
echo "--libs:   $libs"
cmd="\"$cc\" -std=c99 -Wall -Wextra -Werror \"$src/consumer_mpi.c\" $cflags $libs -lm -o \"$work/consumer_pc\""
say "$cmd"
eval "$cmd"
say "$mpiexec -n 2 $* $work/consumer_pc"
LD_LIBRARY_PATH="$moved/$libdir_rel${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$mpiexec" -n 2 "$@" "$work/consumer_pc"

say "$cmake" -S "$src" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix"
"$cmake" -S "$src" -B "$work/cmake" "-DCMAKE_PREFIX_PATH=$prefix" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
"$cmake" --build "$work/cmake"
say "$mpiexec -n 2 $* $work/cmake/consumer_mpi"
"$mpiexec" -n 2 "$@" "$work/cmake/consumer_mpi"
echo "install.mpi OK"
