// SPDX-License-Identifier: Apache-2.0
//
// The binding against the header: a C program (tests/abi_layout.c), compiled
// here with $CC (default `cc`) against include/hwyattn.h, prints every
// struct's size and alignment, every field's offset and size, every enum's
// size and every constant; each must equal what the Rust declarations give,
// and the two lists must name the same things. A second test parses the
// header's HWYATTN_API declarations and checks that the crate declares
// exactly those functions (and that each links).
//
// The header: $HWYATTN_INCLUDE_DIR/hwyattn.h if set, else the repository's
// include/hwyattn.h next to this crate.

use hwyattn_sys::*;
use std::collections::BTreeMap;
use std::mem::{align_of, size_of, MaybeUninit};
use std::path::PathBuf;
use std::process::Command;

/// Offset of a field, as a pointer difference inside an uninitialised value
/// (Rust 1.63 has no offset_of!).
macro_rules! offset_of {
    ($S:ty, $f:ident) => {{
        let u = MaybeUninit::<$S>::uninit();
        let base = u.as_ptr();
        // SAFETY: addr_of! computes the field's address without reading it.
        let field = unsafe { std::ptr::addr_of!((*base).$f) };
        field as *const u8 as usize - base as *const u8 as usize
    }};
}

fn pointee_size<T>(_: *const T) -> usize {
    size_of::<T>()
}

/// Size of a field's type.
macro_rules! field_size {
    ($S:ty, $f:ident) => {{
        let u = MaybeUninit::<$S>::uninit();
        let base = u.as_ptr();
        // SAFETY: as in offset_of!.
        pointee_size(unsafe { std::ptr::addr_of!((*base).$f) })
    }};
}

fn rust_layout() -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    macro_rules! structure {
        ($S:ident { $($f:ident),* }) => {{
            m.insert(format!("sizeof({})", stringify!($S)), size_of::<$S>() as i64);
            m.insert(format!("alignof({})", stringify!($S)), align_of::<$S>() as i64);
            $(
                m.insert(format!("offsetof({}, {})", stringify!($S), stringify!($f)),
                         offset_of!($S, $f) as i64);
                m.insert(format!("sizeof({}.{})", stringify!($S), stringify!($f)),
                         field_size!($S, $f) as i64);
            )*
        }};
    }
    structure!(hwyattn_parallel {
        struct_size,
        num_workers,
        pool,
        parallel_for
    });
    structure!(hwyattn_tensor {
        data,
        dtype,
        rank,
        shape,
        stride
    });
    structure!(hwyattn_sdpa_options {
        struct_size,
        scale,
        causal,
        mask,
        kv_len,
        weights,
        lse,
        window_left,
        window_right,
        softcap,
        alibi_slopes,
        sinks,
        parallel,
        precision,
        reserved0
    });
    structure!(hwyattn_mha_config {
        struct_size,
        embed_dim,
        num_heads,
        head_dim,
        num_kv_heads,
        kdim,
        vdim,
        has_bias,
        reserved0,
        weight_dtype,
        reserved1
    });
    structure!(hwyattn_mha_weights {
        w_q,
        w_k,
        w_v,
        w_o,
        b_q,
        b_k,
        b_v,
        b_o
    });
    structure!(hwyattn_kv_cache {
        struct_size,
        reserved0,
        k,
        v,
        k_scale,
        v_scale,
        block_table,
        block_table_stride
    });
    structure!(hwyattn_kv_batch {
        struct_size,
        num_seqs,
        q_start,
        kv_len,
        q_pos
    });
    macro_rules! enums {
        ($($E:ident),*) => {$(
            m.insert(format!("sizeof({})", stringify!($E)), size_of::<$E>() as i64);
        )*};
    }
    enums!(
        hwyattn_status,
        hwyattn_dtype,
        hwyattn_causal,
        hwyattn_precision
    );
    macro_rules! constants {
        ($($c:ident),*) => {$( m.insert(stringify!($c).to_string(), $c as i64); )*};
    }
    constants!(
        HWYATTN_VERSION_MAJOR,
        HWYATTN_VERSION_MINOR,
        HWYATTN_VERSION_PATCH,
        HWYATTN_ABI_VERSION,
        HWYATTN_OK,
        HWYATTN_INVALID_ARGUMENT,
        HWYATTN_UNSUPPORTED,
        HWYATTN_OUT_OF_MEMORY,
        HWYATTN_INTERNAL_ERROR,
        HWYATTN_F32,
        HWYATTN_F16,
        HWYATTN_BF16,
        HWYATTN_BOOL,
        HWYATTN_I8,
        HWYATTN_F8E4M3,
        HWYATTN_F8E5M2,
        HWYATTN_Q8_0,
        HWYATTN_Q4_0,
        HWYATTN_Q4_1,
        HWYATTN_Q5_0,
        HWYATTN_Q5_1,
        HWYATTN_IQ4_NL,
        HWYATTN_I4,
        HWYATTN_CAUSAL_NONE,
        HWYATTN_CAUSAL_TOP_LEFT,
        HWYATTN_CAUSAL_BOTTOM_RIGHT,
        HWYATTN_PRECISION_F32,
        HWYATTN_PRECISION_BF16,
        HWYATTN_PRECISION_INT8
    );
    m
}

fn include_dir() -> PathBuf {
    match std::env::var_os("HWYATTN_INCLUDE_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include"),
    }
}

fn c_layout() -> BTreeMap<String, i64> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/abi_layout.c");
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hwyattn_abi_layout");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{}` (set CC): {}", cc, e));
    assert!(
        status.success(),
        "`{}` failed to compile {}",
        cc,
        src.display()
    );
    let out = Command::new(&exe).output().expect("run the layout program");
    assert!(out.status.success(), "{} failed", exe.display());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let (name, value) = line.rsplit_once(' ').expect("\"name value\" lines");
        let value: i64 = value.parse().expect("an integer value");
        assert!(
            m.insert(name.to_string(), value).is_none(),
            "{} printed twice",
            name
        );
    }
    m
}

#[test]
fn struct_layouts_and_constants_match_the_header() {
    let c = c_layout();
    let rust = rust_layout();
    let mut problems = Vec::new();
    for (name, cv) in &c {
        match rust.get(name) {
            None => problems.push(format!("{}: in the C program only", name)),
            Some(rv) if rv != cv => problems.push(format!("{}: C {} but Rust {}", name, cv, rv)),
            Some(_) => {}
        }
    }
    for name in rust.keys().filter(|n| !c.contains_key(*n)) {
        problems.push(format!("{}: in the Rust table only", name));
    }
    assert!(problems.is_empty(), "ABI drift:\n{}", problems.join("\n"));
    // The five structs' fields alone give over 90 lines; a truncated run fails.
    assert!(c.len() > 100, "only {} lines from the C program", c.len());
}

/// Names of the functions the header declares (lines starting HWYATTN_API).
fn header_functions() -> Vec<String> {
    let path = include_dir().join("hwyattn.h");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {}", path.display(), e));
    let mut names = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("\nHWYATTN_API ") {
        rest = &rest[at + 13..];
        let decl = &rest[..rest.find(';').expect("a declaration ends with ;")];
        // The first hwyattn_ identifier followed by "(" or ")(" is the name
        // (`hwyattn_status hwyattn_sdpa(`, `void(hwyattn_sdpa_options_init)(`).
        let mut found = None;
        let mut from = 0;
        while let Some(p) = decl[from..].find("hwyattn_") {
            let start = from + p;
            let end = decl[start..]
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                .map_or(decl.len(), |e| start + e);
            let after = &decl[end..];
            if after.starts_with('(') || after.starts_with(")(") {
                found = Some(decl[start..end].to_string());
                break;
            }
            from = end;
        }
        names.push(found.unwrap_or_else(|| panic!("no function name in: {}", decl)));
    }
    names.sort();
    names
}

#[test]
fn every_header_function_is_declared() {
    // Taking each function's address also makes the test link every symbol.
    let declared: Vec<(&str, usize)> = vec![
        ("hwyattn_abi_version", hwyattn_abi_version as usize),
        ("hwyattn_version", hwyattn_version as usize),
        ("hwyattn_status_string", hwyattn_status_string as usize),
        ("hwyattn_last_error", hwyattn_last_error as usize),
        ("hwyattn_simd_target", hwyattn_simd_target as usize),
        ("hwyattn_set_num_threads", hwyattn_set_num_threads as usize),
        ("hwyattn_get_num_threads", hwyattn_get_num_threads as usize),
        (
            "hwyattn_parallel_init_sized",
            hwyattn_parallel_init_sized as usize,
        ),
        (
            "hwyattn_tensor_contiguous",
            hwyattn_tensor_contiguous as usize,
        ),
        (
            "hwyattn_sdpa_options_init_sized",
            hwyattn_sdpa_options_init_sized as usize,
        ),
        (
            "hwyattn_sdpa_options_init",
            hwyattn_sdpa_options_init as usize,
        ),
        (
            "hwyattn_sdpa_options_copy",
            hwyattn_sdpa_options_copy as usize,
        ),
        ("hwyattn_sdpa", hwyattn_sdpa as usize),
        ("hwyattn_merge_states", hwyattn_merge_states as usize),
        (
            "hwyattn_mha_config_init_sized",
            hwyattn_mha_config_init_sized as usize,
        ),
        ("hwyattn_mha_config_init", hwyattn_mha_config_init as usize),
        ("hwyattn_mha_create", hwyattn_mha_create as usize),
        ("hwyattn_mha_destroy", hwyattn_mha_destroy as usize),
        ("hwyattn_mha_forward", hwyattn_mha_forward as usize),
        (
            "hwyattn_kv_cache_init_sized",
            hwyattn_kv_cache_init_sized as usize,
        ),
        (
            "hwyattn_kv_batch_init_sized",
            hwyattn_kv_batch_init_sized as usize,
        ),
        ("hwyattn_kv_attention", hwyattn_kv_attention as usize),
        ("hwyattn_kv_cache_write", hwyattn_kv_cache_write as usize),
    ];
    assert!(declared.iter().all(|&(_, addr)| addr != 0));
    let mut names: Vec<String> = declared.iter().map(|(n, _)| n.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        header_functions(),
        "the crate's functions differ from the header's"
    );
}

#[test]
fn init_sized_functions_fill_the_rust_structs() {
    // SAFETY: each init writes exactly the size it is given into the struct.
    unsafe {
        let mut o = MaybeUninit::<hwyattn_sdpa_options>::uninit();
        hwyattn_sdpa_options_init_sized(o.as_mut_ptr(), size_of::<hwyattn_sdpa_options>());
        let o = o.assume_init();
        assert_eq!(o.struct_size as usize, size_of::<hwyattn_sdpa_options>());
        assert_eq!(
            (o.scale, o.causal, o.softcap, o.reserved0),
            (0.0, HWYATTN_CAUSAL_NONE, 0.0, 0)
        );
        assert!(o.mask.is_null() && o.lse.is_null() && o.parallel.is_null());

        let mut c = MaybeUninit::<hwyattn_mha_config>::uninit();
        hwyattn_mha_config_init_sized(c.as_mut_ptr(), size_of::<hwyattn_mha_config>());
        let c = c.assume_init();
        assert_eq!(c.struct_size as usize, size_of::<hwyattn_mha_config>());
        assert_eq!((c.embed_dim, c.has_bias, c.reserved0), (0, 0, 0));

        let mut p = MaybeUninit::<hwyattn_parallel>::uninit();
        hwyattn_parallel_init_sized(p.as_mut_ptr(), size_of::<hwyattn_parallel>());
        let p = p.assume_init();
        assert_eq!(p.struct_size as usize, size_of::<hwyattn_parallel>());
        assert_eq!(p.num_workers, 1);
        assert!(p.pool.is_null() && p.parallel_for.is_none());

        assert_eq!(hwyattn_abi_version(), HWYATTN_ABI_VERSION);
    }
}
