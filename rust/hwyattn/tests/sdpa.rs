// SPDX-License-Identifier: Apache-2.0
//
// sdpa and merge_states against the f64 reference in common/, and the error
// paths: the library's (messages name the argument) and the binding's own
// (slices too short, zeros the C ABI would read as defaults).

mod common;

use common::{assert_close, attention, Problem, RefCausal, Rng};
use hwyattn::{merge_states, sdpa, Bf16, Causal, SdpaOptions, Status, Tensor, TensorMut, F16};

const TOL: f64 = 2e-5;

struct Data {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

fn data(
    seed: u64,
    b: usize,
    hq: usize,
    hkv: usize,
    lq: usize,
    lk: usize,
    d: usize,
    dv: usize,
) -> Data {
    let mut r = Rng::new(seed);
    Data {
        q: r.vec(b * hq * lq * d),
        k: r.vec(b * hkv * lk * d),
        v: r.vec(b * hkv * lk * dv),
    }
}

/// Runs sdpa on dense [B, H, L, D] views; returns out.
fn run(p: &Problem, opts: &SdpaOptions) -> Vec<f32> {
    let mut out = vec![f32::NAN; p.b * p.hq * p.lq * p.dv];
    let q = Tensor::new(p.q, &[p.b, p.hq, p.lq, p.d]).unwrap();
    let k = Tensor::new(p.k, &[p.kv_batch, p.hkv, p.lk, p.d]).unwrap();
    let v = Tensor::new(p.v, &[p.kv_batch, p.hkv, p.lk, p.dv]).unwrap();
    let mut o = TensorMut::new(&mut out, &[p.b, p.hq, p.lq, p.dv]).unwrap();
    sdpa(&q, &k, &v, &mut o, opts).unwrap();
    out
}

#[test]
fn default_scale_matches_the_reference() {
    let x = data(1, 2, 3, 3, 5, 7, 8, 6);
    let p = Problem::new(2, 3, 3, 5, 7, 8, 6, &x.q, &x.k, &x.v);
    let (want, _) = attention(&p);
    assert_close(&run(&p, &SdpaOptions::new()), &want, TOL, "out");
}

#[test]
fn explicit_scale_and_both_causal_rules() {
    let x = data(2, 1, 2, 2, 4, 9, 16, 16);
    for (causal, rc) in [
        (Causal::TopLeft, RefCausal::TopLeft),
        (Causal::BottomRight, RefCausal::BottomRight),
    ] {
        let mut p = Problem::new(1, 2, 2, 4, 9, 16, 16, &x.q, &x.k, &x.v);
        p.scale = 0.3;
        p.causal = rc;
        let (want, _) = attention(&p);
        let got = run(&p, &SdpaOptions::new().scale(Some(0.3)).causal(causal));
        assert_close(&got, &want, TOL, "out");
    }
    // Top-left with Lq < Lk leaves keys 4.. unseen by every row: the two
    // rules must differ, or the test above could not tell them apart.
    let p = Problem::new(1, 2, 2, 4, 9, 16, 16, &x.q, &x.k, &x.v);
    assert_ne!(
        run(&p, &SdpaOptions::new().causal(Causal::TopLeft)),
        run(&p, &SdpaOptions::new().causal(Causal::BottomRight))
    );
}

#[test]
fn grouped_query_attention_with_a_shared_kv_batch() {
    // Hq = 6 query heads over Hkv = 2 (groups of 3); K/V batch 1 shared by B = 2.
    let mut r = Rng::new(3);
    let (b, hq, hkv, lq, lk, d) = (2, 6, 2, 3, 11, 8);
    let q = r.vec(b * hq * lq * d);
    let k = r.vec(hkv * lk * d);
    let v = r.vec(hkv * lk * d);
    let mut p = Problem::new(b, hq, hkv, lq, lk, d, d, &q, &k, &v);
    p.kv_batch = 1;
    let (want, _) = attention(&p);
    assert_close(&run(&p, &SdpaOptions::new()), &want, TOL, "out");
}

#[test]
fn softcap_and_sliding_window() {
    let x = data(4, 1, 2, 1, 12, 12, 8, 8);
    let mut p = Problem::new(1, 2, 1, 12, 12, 8, 8, &x.q, &x.k, &x.v);
    p.scale = 4.0; // large scores, so the cap bites
    p.softcap = 1.5;
    p.causal = RefCausal::TopLeft;
    p.window_left = 3;
    let (want, _) = attention(&p);
    let opts = SdpaOptions::new()
        .scale(Some(4.0))
        .softcap(1.5)
        .causal(Causal::TopLeft)
        .window_left(3);
    assert_close(&run(&p, &opts), &want, TOL, "out");
    // Without the cap the result differs (the cap is doing something).
    let uncapped = run(
        &p,
        &SdpaOptions::new()
            .scale(Some(4.0))
            .causal(Causal::TopLeft)
            .window_left(3),
    );
    assert!(uncapped
        .iter()
        .zip(&want)
        .any(|(&g, &w)| (g as f64 - w).abs() > 1e-3));
}

#[test]
fn alibi_sinks_and_lse() {
    let x = data(5, 2, 2, 2, 3, 6, 4, 4);
    let slopes = [0.5f32, 0.125];
    let sinks = [0.7f32, -1.0];
    let mut p = Problem::new(2, 2, 2, 3, 6, 4, 4, &x.q, &x.k, &x.v);
    p.alibi = Some(&slopes);
    p.sinks = Some(&sinks);
    p.causal = RefCausal::BottomRight;
    let (want, want_lse) = attention(&p);
    let mut lse = vec![f32::NAN; 2 * 2 * 3];
    let got = run(
        &p,
        &SdpaOptions::new()
            .alibi_slopes(&slopes)
            .sinks(&sinks)
            .causal(Causal::BottomRight)
            .lse(TensorMut::new(&mut lse, &[2, 2, 3]).unwrap()),
    );
    assert_close(&got, &want, TOL, "out");
    assert_close(&lse, &want_lse, TOL, "lse");
}

#[test]
fn bool_mask_and_kv_len() {
    let x = data(6, 2, 1, 1, 4, 5, 4, 3);
    let mut rng = Rng::new(60);
    let mask: Vec<bool> = (0..4 * 5).map(|_| rng.uniform() > -0.4).collect();
    let kv_len = [5i32, 2];
    let mut p = Problem::new(2, 1, 1, 4, 5, 4, 3, &x.q, &x.k, &x.v);
    p.bool_mask = Some(&mask);
    p.kv_len = Some(&kv_len);
    let (want, _) = attention(&p);
    // The [Lq, Lk] mask broadcasts over batch and heads.
    let opts = SdpaOptions::new()
        .mask(Tensor::new(&mask, &[4, 5]).unwrap())
        .kv_len(&kv_len);
    assert_close(&run(&p, &opts), &want, TOL, "out");
}

#[test]
fn f16_mask_of_zeros_and_infinities_is_the_bool_mask() {
    // An additive F16 mask of 0 (attend) and -inf (0xFC00, blocked) against
    // the oracle's bool mask of the same keys.
    let x = data(61, 2, 1, 1, 4, 5, 4, 3);
    let mut rng = Rng::new(61);
    let mask: Vec<bool> = (0..4 * 5).map(|_| rng.uniform() > -0.4).collect();
    let f16_mask: Vec<F16> = mask
        .iter()
        .map(|&attend| F16(if attend { 0x0000 } else { 0xFC00 }))
        .collect();
    let mut p = Problem::new(2, 1, 1, 4, 5, 4, 3, &x.q, &x.k, &x.v);
    p.bool_mask = Some(&mask);
    let (want, _) = attention(&p);
    let opts = SdpaOptions::new().mask(Tensor::new(&f16_mask, &[4, 5]).unwrap());
    assert_close(&run(&p, &opts), &want, TOL, "out");
}

#[test]
fn strided_views_read_a_bshd_layout() {
    // q, k, v and out stored [B, L, H, D] (the layout of a fused QKV
    // projection), viewed as [B, H, L, D] through strides.
    let (b, h, l, d) = (2, 3, 5, 4);
    let x = data(7, b, h, h, l, l, d, d);
    let bhld_from_blhd = |src: &[f32]| {
        let mut dst = vec![0.0; src.len()];
        for bi in 0..b {
            for hi in 0..h {
                for li in 0..l {
                    for di in 0..d {
                        dst[((bi * h + hi) * l + li) * d + di] =
                            src[((bi * l + li) * h + hi) * d + di];
                    }
                }
            }
        }
        dst
    };
    let (q, k, v) = (
        bhld_from_blhd(&x.q),
        bhld_from_blhd(&x.k),
        bhld_from_blhd(&x.v),
    );
    let (want, _) = attention(&Problem::new(b, h, h, l, l, d, d, &q, &k, &v));
    let shape = [b, h, l, d];
    let strides = [l * h * d, d, h * d, 1];
    let mut out = vec![0.0f32; b * l * h * d];
    sdpa(
        &Tensor::with_strides(&x.q, &shape, &strides).unwrap(),
        &Tensor::with_strides(&x.k, &shape, &strides).unwrap(),
        &Tensor::with_strides(&x.v, &shape, &strides).unwrap(),
        &mut TensorMut::with_strides(&mut out, &shape, &strides).unwrap(),
        &SdpaOptions::new(),
    )
    .unwrap();
    assert_close(&bhld_from_blhd(&out), &want, TOL, "out");
}

#[test]
fn bf16_inputs_match_the_reference_on_the_rounded_values() {
    let x = data(8, 1, 2, 2, 3, 5, 8, 8);
    let round = |v: &[f32]| -> (Vec<Bf16>, Vec<f32>) {
        let h: Vec<Bf16> = v.iter().map(|&f| Bf16::from_f32(f)).collect();
        let f = h.iter().map(|x| x.to_f32()).collect();
        (h, f)
    };
    let ((qh, qf), (kh, kf), (vh, vf)) = (round(&x.q), round(&x.k), round(&x.v));
    let (want, _) = attention(&Problem::new(1, 2, 2, 3, 5, 8, 8, &qf, &kf, &vf));
    let mut out = vec![0.0f32; 2 * 3 * 8];
    sdpa(
        &Tensor::new(&qh, &[2, 3, 8]).unwrap(),
        &Tensor::new(&kh, &[2, 5, 8]).unwrap(),
        &Tensor::new(&vh, &[2, 5, 8]).unwrap(),
        &mut TensorMut::new(&mut out, &[2, 3, 8]).unwrap(),
        &SdpaOptions::new(),
    )
    .unwrap();
    assert_close(&out, &want, TOL, "out");
    assert_eq!(Bf16::from_f32(1.0).0, 0x3f80);
    assert_eq!(Bf16::from_f32(1.0 + 1.0 / 256.0).0, 0x3f80); // a tie rounds to even
}

#[test]
fn merged_shards_equal_the_whole() {
    let (h, l, lk, d) = (2, 3, 10, 8);
    let x = data(9, 1, h, h, l, lk, d, d);
    let (want, want_lse) = attention(&Problem::new(1, h, h, l, lk, d, d, &x.q, &x.k, &x.v));
    let q = Tensor::new(&x.q, &[h, l, d]).unwrap();
    let split = 4;
    let mut outs = vec![vec![0.0f32; h * l * d]; 2];
    let mut lses = vec![vec![0.0f32; h * l]; 2];
    for (i, (o, s)) in outs.iter_mut().zip(lses.iter_mut()).enumerate() {
        let (from, n) = if i == 0 {
            (0, split)
        } else {
            (split, lk - split)
        };
        // Key shards as strided views of the whole: no copies.
        let k = Tensor::with_strides(&x.k[from * d..], &[h, n, d], &[lk * d, d, 1]).unwrap();
        let v = Tensor::with_strides(&x.v[from * d..], &[h, n, d], &[lk * d, d, 1]).unwrap();
        let opts = SdpaOptions::new().lse(TensorMut::new(s, &[h, l]).unwrap());
        sdpa(
            &q,
            &k,
            &v,
            &mut TensorMut::new(o, &[h, l, d]).unwrap(),
            &opts,
        )
        .unwrap();
    }
    let mut out = vec![0.0f32; h * l * d];
    let mut lse = vec![0.0f32; h * l];
    let o_views: Vec<Tensor> = outs
        .iter()
        .map(|o| Tensor::new(o, &[h, l, d]).unwrap())
        .collect();
    let l_views: Vec<Tensor> = lses
        .iter()
        .map(|s| Tensor::new(s, &[h, l]).unwrap())
        .collect();
    merge_states(
        &o_views,
        &l_views,
        None,
        &mut TensorMut::new(&mut out, &[h, l, d]).unwrap(),
        Some(&mut TensorMut::new(&mut lse, &[h, l]).unwrap()),
    )
    .unwrap();
    assert_close(&out, &want, TOL, "merged out");
    assert_close(&lse, &want_lse, TOL, "merged lse");
    // Mismatched lists are the binding's error.
    let e = merge_states(
        &o_views,
        &l_views[..1],
        None,
        &mut TensorMut::new(&mut out, &[h, l, d]).unwrap(),
        None,
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("lses"), "{}", e);
}

#[test]
fn library_errors_name_the_argument_and_write_nothing() {
    let x = data(10, 1, 2, 2, 3, 4, 8, 8);
    let mut out = vec![-7.0f32; 2 * 3 * 8];
    let q = Tensor::new(&x.q, &[2, 3, 8]).unwrap();
    let k = Tensor::new(&x.k[..2 * 4 * 6], &[2, 4, 6]).unwrap(); // head_dim 6, q has 8
    let v = Tensor::new(&x.v, &[2, 4, 8]).unwrap();
    let e = sdpa(
        &q,
        &k,
        &v,
        &mut TensorMut::new(&mut out, &[2, 3, 8]).unwrap(),
        &SdpaOptions::new(),
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert_eq!(e.code(), hwyattn_sys::HWYATTN_INVALID_ARGUMENT);
    assert!(
        e.message().starts_with("k:") && e.message().contains("head_dim"),
        "{}",
        e.message()
    );
    assert!(
        e.to_string().starts_with("HWYATTN_INVALID_ARGUMENT: k:"),
        "{}",
        e
    );
    assert!(out.iter().all(|&o| o == -7.0));

    // A NaN softcap: the library's check, naming softcap.
    let k = Tensor::new(&x.k, &[2, 4, 8]).unwrap();
    let e = sdpa(
        &q,
        &k,
        &v,
        &mut TensorMut::new(&mut out, &[2, 3, 8]).unwrap(),
        &SdpaOptions::new().softcap(f32::NAN),
    )
    .unwrap_err();
    assert!(e.message().contains("softcap"), "{}", e.message());
    assert!(out.iter().all(|&o| o == -7.0));
}

#[test]
fn slices_too_short_are_caught_before_c() {
    let buf = vec![0.0f32; 23];
    let e = Tensor::new(&buf, &[1, 2, 3, 4]).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(
        e.message().contains("23 elements") && e.message().contains("24"),
        "{}",
        e.message()
    );
    // Strides reaching past the end (the last element is at 1*20 + 2*5 + 3).
    let e = Tensor::with_strides(&buf, &[2, 3, 4], &[20, 5, 1]).unwrap_err();
    assert!(e.message().contains("reaches 34"), "{}", e.message());
    assert!(Tensor::new(&buf, &[0, 4])
        .unwrap_err()
        .message()
        .contains("shape[0] is 0"));
    assert!(Tensor::new(&buf, &[1, 1, 1, 1, 1]).is_err());
    assert!(Tensor::with_strides(&buf, &[2, 3], &[1]).is_err());
    assert!(Tensor::new(&buf, &[usize::MAX, 2]).is_err());

    // kv_len [B] and sinks [Hq] are read through bare pointers by C: a
    // short slice is the binding's error.
    let x = data(11, 3, 2, 2, 2, 2, 4, 4);
    let q = Tensor::new(&x.q, &[3, 2, 2, 4]).unwrap();
    let k = Tensor::new(&x.k, &[3, 2, 2, 4]).unwrap();
    let mut out = vec![0.0f32; 3 * 2 * 2 * 4];
    let mut o = TensorMut::new(&mut out, &[3, 2, 2, 4]).unwrap();
    let e = sdpa(&q, &k, &k, &mut o, &SdpaOptions::new().kv_len(&[2, 2])).unwrap_err();
    assert!(
        e.message()
            .contains("kv_len has 2 elements but the batch is 3"),
        "{}",
        e.message()
    );
    let e = sdpa(&q, &k, &k, &mut o, &SdpaOptions::new().sinks(&[0.0])).unwrap_err();
    assert!(
        e.message().contains("sinks has 1 elements"),
        "{}",
        e.message()
    );
    let e = sdpa(&q, &k, &k, &mut o, &SdpaOptions::new().alibi_slopes(&[])).unwrap_err();
    assert!(e.message().contains("alibi_slopes"), "{}", e.message());
}

#[test]
fn explicit_zeros_are_rejected_not_read_as_defaults() {
    let x = data(12, 1, 1, 1, 2, 3, 4, 4);
    let q = Tensor::new(&x.q, &[2, 4]).unwrap();
    let k = Tensor::new(&x.k, &[3, 4]).unwrap();
    let v = Tensor::new(&x.v, &[3, 4]).unwrap();
    let mut out = vec![5.0f32; 8];
    for (opts, name) in [
        (SdpaOptions::new().scale(Some(0.0)), "scale"),
        (SdpaOptions::new().scale(Some(-0.0)), "scale"),
        (SdpaOptions::new().softcap(0.0), "softcap"),
        (SdpaOptions::new().window_left(0), "window_left"),
        (SdpaOptions::new().window_right(0), "window_right"),
    ] {
        let e = sdpa(
            &q,
            &k,
            &v,
            &mut TensorMut::new(&mut out, &[2, 4]).unwrap(),
            &opts,
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(e.message().starts_with(name), "{}", e.message());
        assert!(out.iter().all(|&o| o == 5.0));
    }
    let e = sdpa(
        &q,
        &k,
        &v,
        &mut TensorMut::new(&mut out, &[2, 4]).unwrap(),
        &SdpaOptions::new().scale(Some(0.0)),
    )
    .unwrap_err();
    assert!(
        e.message().contains("PyTorch") && e.message().contains("None"),
        "{}",
        e.message()
    );
    // None is the default 1/sqrt(D), the same bits as an explicit 0.5 here.
    let mut a = vec![0.0f32; 8];
    let mut b = vec![0.0f32; 8];
    sdpa(
        &q,
        &k,
        &v,
        &mut TensorMut::new(&mut a, &[2, 4]).unwrap(),
        &SdpaOptions::new().scale(None),
    )
    .unwrap();
    sdpa(
        &q,
        &k,
        &v,
        &mut TensorMut::new(&mut b, &[2, 4]).unwrap(),
        &SdpaOptions::new().scale(Some(0.5)),
    )
    .unwrap();
    assert_eq!(a, b);
}

#[test]
fn runtime_queries() {
    assert_eq!(hwyattn::abi_version(), hwyattn_sys::HWYATTN_ABI_VERSION);
    let want = format!(
        "{}.{}.{}",
        hwyattn_sys::HWYATTN_VERSION_MAJOR,
        hwyattn_sys::HWYATTN_VERSION_MINOR,
        hwyattn_sys::HWYATTN_VERSION_PATCH
    );
    assert_eq!(hwyattn::version(), want);
    // The crate's version (Cargo.toml, bumped by hand) is the header's.
    assert_eq!(env!("CARGO_PKG_VERSION"), want);
    assert!(!hwyattn::simd_target().is_empty());
    assert!(hwyattn::num_threads() >= 1);
    let e = hwyattn::set_num_threads(100_000).unwrap_err();
    assert_eq!(e.status(), Status::Unsupported);
}

/// An F16's exact value (the test's own decoding).
fn f16_value(h: u16) -> f64 {
    let (sign, exp, mant) = (
        (h >> 15) as i32,
        ((h >> 10) & 0x1f) as i32,
        (h & 0x3ff) as f64,
    );
    let mag = if exp == 0 {
        mant * 2f64.powi(-24)
    } else {
        (1.0 + mant / 1024.0) * 2f64.powi(exp - 15)
    };
    if sign == 1 {
        -mag
    } else {
        mag
    }
}

#[test]
fn bf16_and_f16_outputs_are_the_f32_result_rounded_once() {
    let x = data(31, 2, 4, 2, 3, 11, 16, 24);
    let p = Problem::new(2, 4, 2, 3, 11, 16, 24, &x.q, &x.k, &x.v);
    let opts = SdpaOptions::new().causal(Causal::BottomRight);
    let want = run(&p, &opts);
    let (q, k, v) = (
        Tensor::new(p.q, &[p.b, p.hq, p.lq, p.d]).unwrap(),
        Tensor::new(p.k, &[p.kv_batch, p.hkv, p.lk, p.d]).unwrap(),
        Tensor::new(p.v, &[p.kv_batch, p.hkv, p.lk, p.dv]).unwrap(),
    );
    let shape = [p.b, p.hq, p.lq, p.dv];
    let mut b16 = vec![Bf16(0xffff); want.len()];
    sdpa(
        &q,
        &k,
        &v,
        &mut TensorMut::new(&mut b16, &shape).unwrap(),
        &opts,
    )
    .unwrap();
    for (i, (&got, &w)) in b16.iter().zip(&want).enumerate() {
        assert_eq!(got, Bf16::from_f32(w), "bf16 out[{}] of {}", i, w);
    }
    let mut h16 = vec![F16(0xffff); want.len()];
    sdpa(
        &q,
        &k,
        &v,
        &mut TensorMut::new(&mut h16, &shape).unwrap(),
        &opts,
    )
    .unwrap();
    for (i, (&got, &w)) in h16.iter().zip(&want).enumerate() {
        // The nearest binary16: no closer neighbour (these values are normal).
        let (y, w) = (f16_value(got.0), w as f64);
        let (below, above) = (f16_value(got.0.wrapping_sub(1)), f16_value(got.0 + 1));
        assert!(y.signum() == w.signum() || w == 0.0, "f16 out[{}]", i);
        assert!(
            (y - w).abs() <= (below - w).abs() && (y - w).abs() <= (above - w).abs(),
            "f16 out[{}] = {} for {}",
            i,
            y,
            w
        );
    }
}
