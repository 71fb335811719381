#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/test.sh: build hwyattn (Release) with its tests and run them all with
# ctest: the unit and C ABI tests (tests/) and the consumer tests that install
# the build into a temporary prefix and use it via CMake and pkg-config
# (tests/install/). Exits non-zero if anything fails.
#
# Usage (from anywhere; as root on a fresh Debian 12 it installs what is missing):
#   scripts/test.sh [extra ctest flags, e.g. -R install]
# Environment:
#   BUILD_DIR     build directory (default: build, relative to the repo root)
#   JOBS          parallel build and test jobs (default: nproc)
#   TEST_TIMEOUT  per-test timeout in seconds (default 900)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TEST_TIMEOUT=${TEST_TIMEOUT:-900}

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
install_missing_packages test.sh

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DHWYATTN_BUILD_TESTS=ON
cmake --build "$BUILD_DIR" -j"$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" --timeout "$TEST_TIMEOUT" "$@"
