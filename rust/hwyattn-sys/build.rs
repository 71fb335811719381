// SPDX-License-Identifier: Apache-2.0
//
// Finds libhwyattn for the linker, in this order:
//   1. HWYATTN_LIB_DIR: the directory holding libhwyattn.so (a build tree or
//      an install's lib directory); linked dynamically.
//   2. `pkg-config --libs hwyattn` (the program named by PKG_CONFIG, else
//      `pkg-config`), run as a process: its -L directories and -l libraries;
//      set PKG_CONFIG_PATH for an install outside the default prefixes.
//   3. Neither: plain -lhwyattn, found (or not) on the linker's default path.
// At run time the dynamic loader must find libhwyattn.so.1 too: install it in
// a system directory, or set LD_LIBRARY_PATH (see README.md).

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=HWYATTN_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    if let Some(dir) = env::var_os("HWYATTN_LIB_DIR") {
        let dir = dir.to_string_lossy().into_owned();
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:rustc-link-lib=dylib=hwyattn");
        // Dependent build scripts read it as DEP_HWYATTN_LIB_DIR.
        println!("cargo:lib_dir={}", dir);
        return;
    }

    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    match Command::new(&pkg_config)
        .args(["--libs", "hwyattn"])
        .output()
    {
        Ok(out) if out.status.success() => {
            let flags = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut linked = false;
            for flag in flags.split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={}", dir);
                    println!("cargo:lib_dir={}", dir);
                } else if let Some(lib) = flag.strip_prefix("-l") {
                    println!("cargo:rustc-link-lib=dylib={}", lib);
                    linked |= lib == "hwyattn";
                }
            }
            if !linked {
                println!("cargo:rustc-link-lib=dylib=hwyattn");
            }
        }
        Ok(out) => {
            println!(
                "cargo:warning=`{} --libs hwyattn` failed ({}); linking -lhwyattn from the default \
                 path (set HWYATTN_LIB_DIR or PKG_CONFIG_PATH to choose a library)",
                pkg_config,
                String::from_utf8_lossy(&out.stderr).trim()
            );
            println!("cargo:rustc-link-lib=dylib=hwyattn");
        }
        Err(e) => {
            println!(
                "cargo:warning=could not run `{}` ({}); linking -lhwyattn from the default path \
                 (set HWYATTN_LIB_DIR to choose a library)",
                pkg_config, e
            );
            println!("cargo:rustc-link-lib=dylib=hwyattn");
        }
    }
}
