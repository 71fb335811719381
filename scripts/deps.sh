# SPDX-License-Identifier: Apache-2.0
#
# scripts/deps.sh: sourced by bench.sh and test.sh. install_missing_packages
# installs the Debian 12 packages hwyattn's build, tests and benchmarks need,
# if any is missing (apt-get update only then). Root (or sudo) is needed only
# when something is missing.

# python3-matplotlib: bench/report.py's and docs/scaling_model.py's charts
# (bench/charts.py) and their test, bench_charts_test. python3-venv and
# python3-pip: the Python package's install tests (python_wheel,
# python_install: `python3 -m venv`, `pip install ./python`) and the test
# venv with ml_dtypes that tests/python/CMakeLists.txt makes.
HWYATTN_PACKAGES=(cmake g++ make pkg-config libhwy-dev libbenchmark-dev libgtest-dev curl ca-certificates
                  python3 python3-numpy python3-protobuf python3-matplotlib python3-venv python3-pip
                  rustc cargo golang-go libopenmpi-dev openmpi-bin)
# scripts/test.sh --sanitizers adds these: clang with its sanitizer and
# libFuzzer runtimes (and libomp for clang's -fopenmp).
HWYATTN_SANITIZER_PACKAGES=(clang-14 libclang-rt-14-dev libomp-14-dev)
# scripts/cross_test.sh sets these: the architectures whose packages
# (name:arch) it installs, added to dpkg's list when missing.
HWYATTN_FOREIGN_ARCHITECTURES=()

install_missing_packages() {
  local who=${1:-hwyattn}
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "$who: not a Debian system; make sure these are installed: ${HWYATTN_PACKAGES[*]}" >&2
    return 0
  fi
  local missing=() p a
  local new_arches=()
  for a in "${HWYATTN_FOREIGN_ARCHITECTURES[@]}"; do
    if ! dpkg --print-foreign-architectures | grep -qx "$a" && [[ $(dpkg --print-architecture) != "$a" ]]; then
      new_arches+=("$a")
    fi
  done
  for p in "${HWYATTN_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  ((${#missing[@]} == 0 && ${#new_arches[@]} == 0)) && return 0
  echo "$who: installing ${new_arches[*]:+architectures ${new_arches[*]}, }${missing[*]}"
  local sudo=()
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "$who: run as root to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  for a in "${new_arches[@]}"; do "${sudo[@]}" dpkg --add-architecture "$a"; done
  # A mirror caught mid-sync fails one index ("File has unexpected size")
  # while the others load: go on with what loaded; the install below fails
  # if a package is really unavailable.
  "${sudo[@]}" apt-get update || echo "$who: apt-get update reported errors; trying the install anyway" >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
}

# The Highway (>= 1.4) source archive or tree that the Highway-1.4 builds use
# (scripts/cross_test.sh's *-hwy14 legs, scripts/windows_test.sh), or nothing:
# $HWYATTN_HIGHWAY_ARCHIVE, else the pinned
# ../shared/third_party/highway-1.4.0.tar.gz (also next to the main checkout
# of a git worktree). Run from the repository's root.
highway_archive() {
  if [[ -n ${HWYATTN_HIGHWAY_ARCHIVE:-} ]]; then
    realpath -m "$HWYATTN_HIGHWAY_ARCHIVE"
    return
  fi
  local name=highway-1.4.0.tar.gz dirs=(../shared/third_party) common dir
  # A git worktree: the pinned archives sit next to the main checkout.
  common=$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
  [[ -n $common ]] && dirs+=("$(dirname "$common")/../shared/third_party")
  for dir in "${dirs[@]}"; do
    if [[ -f $dir/$name ]]; then
      realpath "$dir/$name"
      return
    fi
  done
}
