# SPDX-License-Identifier: Apache-2.0
#
# windows.cmake: what a Windows build (MinGW-w64; cmake/toolchains/
# x86_64-w64-mingw32.cmake cross-compiles one from Debian, scripts/windows_test.sh
# tests it under Wine) does differently. Included by the top-level
# CMakeLists.txt when WIN32, before Highway and the library's targets;
# hwyattn_windows_dll(hwyattn) is called once the shared library exists.
#
# - The shared library is hwyattn.dll with its import library libhwyattn.dll.a
#   (MinGW's name, which -lhwyattn finds before the static libhwyattn.a) and
#   exports exactly the functions include/hwyattn.h declares with HWYATTN_API:
#   a module-definition file (hwyattn.def) is written from the header at
#   configure time (again whenever the header changes), so the export list
#   cannot drift from it, and the link fails if the header declares a
#   function the library does not define. The objects carry no
#   __declspec(dllexport) (HWYATTN_BUILDING_SHARED is not defined for them on
#   Windows): libhwyattn.a does not make a program or DLL that links it export
#   hwyattn_* by accident. Users of the DLL get HWYATTN_SHARED (dllimport) from
#   the CMake target.
# - GCC and 32- or 64-byte vectors on the stack. The Win64 ABI aligns the
#   stack to 16 bytes only, and GCC cannot realign a Win64 frame (its SEH
#   unwind data cannot describe that: GCC bug 54412). Upstream GCC still
#   spills AVX and AVX-512 registers, and passes vector arguments by
#   reference, with aligned moves (vmovaps, vmovdqa64, ...) to slots it takes
#   for 32- or 64-byte aligned: such a move faults whenever the frame sits 16
#   bytes off. Debian's gcc-mingw-w64 is patched to emit unaligned moves
#   instead (Debian bug 939559, since 2019: its GCC 12 compiles the kernels,
#   AVX2 and AVX3 alike, with no aligned 32/64-byte move even without the
#   option below); other builds of GCC for MinGW need not be.
#   -Wa,-muse-unaligned-vector-move (GNU as >= 2.38) makes it hold for any
#   GCC: the assembler encodes every aligned vector move as its unaligned twin
#   (vmovups, vmovdqu64, ...), which has no alignment requirement and on every
#   CPU with AVX runs at the same speed on aligned data. It is added to every
#   C and C++ compilation (the bundled Highway and the tests too).
#   Non-temporal moves (vmovntps, ...) keep their alignment rule; the kernels
#   have none. scripts/windows_test.sh disassembles hwyattn.dll and fails if
#   an aligned 32/64-byte move is left, or a non-temporal one addresses the
#   stack. clang realigns such frames itself and needs no option (but brings
#   no libgomp for MinGW: HWYATTN_OPENMP=OFF with it).
# - HWYATTN_MINGW_STATIC_RUNTIME (default ON): the DLL and the programs link
#   libstdc++, libgcc, libgomp and winpthreads statically, so hwyattn.dll
#   needs only Windows' own DLLs (KERNEL32, msvcrt). OFF links them as DLLs
#   (libstdc++-6.dll, libgcc_s_seh-1.dll, libgomp-1.dll, libwinpthread-1.dll,
#   which must then be found next to the program or on PATH).
# - A top-level build writes hwyattn.dll and the programs to <build>/bin
#   (Windows finds a DLL next to the program).

if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-Wa,-muse-unaligned-vector-move")
  check_cxx_source_compiles("int main() { return 0; }" HWYATTN_AS_UNALIGNED_VECTOR_MOVE)
  unset(CMAKE_REQUIRED_FLAGS)
  if(NOT HWYATTN_AS_UNALIGNED_VECTOR_MOVE)
    message(FATAL_ERROR "GCC on 64-bit Windows needs -Wa,-muse-unaligned-vector-move (GNU binutils "
                        ">= 2.38) to keep AVX and AVX-512 stack slots safe (cmake/windows.cmake); "
                        "the assembler rejected it. Use newer binutils, or clang.")
  endif()
  add_compile_options(-Wa,-muse-unaligned-vector-move)
endif()

option(HWYATTN_MINGW_STATIC_RUNTIME
       "MinGW: link libstdc++, libgcc, libgomp and winpthreads statically into hwyattn.dll and the programs" ON)
if(MINGW AND HWYATTN_MINGW_STATIC_RUNTIME)
  add_link_options(-static)
  # FindOpenMP links the library it finds by its path, and finds the import
  # library libgomp.dll.a first; -static needs the archive.
  if(HWYATTN_OPENMP AND NOT OpenMP_gomp_LIBRARY)
    execute_process(COMMAND "${CMAKE_CXX_COMPILER}" -print-file-name=libgomp.a
                    OUTPUT_VARIABLE _gomp OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(IS_ABSOLUTE "${_gomp}" AND EXISTS "${_gomp}")
      set(OpenMP_gomp_LIBRARY "${_gomp}" CACHE FILEPATH "Path to the gomp library for OpenMP (static: HWYATTN_MINGW_STATIC_RUNTIME)")
    endif()
  endif()
endif()

# A DLL is found next to the program that loads it (or on PATH): a top-level
# build puts hwyattn.dll and every program (tests, examples) in <build>/bin.
if(PROJECT_IS_TOP_LEVEL AND NOT CMAKE_RUNTIME_OUTPUT_DIRECTORY)
  set(CMAKE_RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bin")
endif()

# hwyattn_windows_dll(<target>): names the shared library hwyattn.dll and
# links it with the .def file written from include/hwyattn.h.
function(hwyattn_windows_dll target)
  set(_header "${PROJECT_SOURCE_DIR}/include/hwyattn.h")
  set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_header}")
  file(READ "${_header}" _text)
  # A declaration is a line starting "HWYATTN_API "; its name is the first
  # hwyattn_ identifier followed by "(" or ")(" (`hwyattn_status hwyattn_sdpa(`,
  # `void(hwyattn_sdpa_options_init)(`), as rust/hwyattn-sys/tests/abi.rs reads it.
  string(REGEX MATCHALL "\nHWYATTN_API " _starts "${_text}")
  string(REGEX MATCHALL "\nHWYATTN_API [^;(]*\\(?hwyattn_[A-Za-z0-9_]+\\)?\\(" _decls "${_text}")
  list(LENGTH _starts _n_starts)
  list(LENGTH _decls _n_decls)
  if(NOT _n_starts EQUAL _n_decls OR _n_decls EQUAL 0)
    message(FATAL_ERROR "cmake/windows.cmake: read ${_n_decls} function names from the "
                        "${_n_starts} HWYATTN_API declarations of ${_header}")
  endif()
  set(_def "LIBRARY hwyattn.dll\nEXPORTS\n")
  foreach(_decl IN LISTS _decls)
    string(REGEX MATCH "(hwyattn_[A-Za-z0-9_]+)\\)?\\($" _ "${_decl}")
    string(APPEND _def "  ${CMAKE_MATCH_1}\n")
  endforeach()
  # Written only when it changes (no relink on every configure).
  file(CONFIGURE OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/hwyattn.def" CONTENT "${_def}" @ONLY)
  target_sources(${target} PRIVATE "${CMAKE_CURRENT_BINARY_DIR}/hwyattn.def")
  # hwyattn.dll (MinGW would say libhwyattn.dll); the import library keeps
  # MinGW's libhwyattn.dll.a.
  set_target_properties(${target} PROPERTIES PREFIX "")
  target_compile_definitions(${target} INTERFACE HWYATTN_SHARED)
endfunction()
