// SPDX-License-Identifier: Apache-2.0
//
// MultiheadAttention against its definition composed in f64 (projections,
// the reference attention of common/, output projection), repeatability,
// use from several threads, and its errors.

mod common;

use common::{assert_close, attention, linear, Problem, RefCausal, Rng};
use hwyattn::{Causal, MhaBiases, MhaConfig, MhaWeights, MultiheadAttention, SdpaOptions, Status};
use hwyattn::{Tensor, TensorMut};

// E = 16, 4 query heads of 6 (inner width 24, not E), 2 K/V heads (GQA),
// key and value inputs of widths 10 and 12.
const E: usize = 16;
const H: usize = 4;
const D: usize = 6;
const HKV: usize = 2;
const KDIM: usize = 10;
const VDIM: usize = 12;

struct Layer {
    w: [Vec<f32>; 4],
    b: [Vec<f32>; 4],
}

fn layer(seed: u64, kdim: usize, vdim: usize) -> Layer {
    let mut r = Rng::new(seed);
    Layer {
        w: [
            r.vec(H * D * E),
            r.vec(HKV * D * kdim),
            r.vec(HKV * D * vdim),
            r.vec(E * H * D),
        ],
        b: [r.vec(H * D), r.vec(HKV * D), r.vec(HKV * D), r.vec(E)],
    }
}

fn config(kdim: usize, vdim: usize) -> MhaConfig {
    MhaConfig {
        head_dim: Some(D),
        num_kv_heads: Some(HKV),
        kdim: Some(kdim),
        vdim: Some(vdim),
        ..MhaConfig::new(E, H)
    }
}

fn weights(l: &Layer) -> MhaWeights<'_> {
    MhaWeights {
        w_q: &l.w[0],
        w_k: &l.w[1],
        w_v: &l.w[2],
        w_o: &l.w[3],
        biases: Some(MhaBiases {
            b_q: &l.b[0],
            b_k: &l.b[1],
            b_v: &l.b[2],
            b_o: &l.b[3],
        }),
    }
}

/// [B, L, heads*D] -> [B, heads, L, D] as f32 for the reference.
fn split_heads(x: &[f64], b: usize, l: usize, heads: usize) -> Vec<f32> {
    let mut y = vec![0.0f32; x.len()];
    for bi in 0..b {
        for li in 0..l {
            for h in 0..heads {
                for d in 0..D {
                    y[((bi * heads + h) * l + li) * D + d] =
                        x[((bi * l + li) * heads + h) * D + d] as f32;
                }
            }
        }
    }
    y
}

#[allow(clippy::too_many_arguments)]
fn reference(
    l: &Layer,
    query: &[f32],
    key: &[f32],
    value: &[f32],
    b: usize,
    lq: usize,
    lk: usize,
    kdim: usize,
    vdim: usize,
    causal: RefCausal,
) -> Vec<f64> {
    let f64s = |x: &[f32]| x.iter().map(|&v| v as f64).collect::<Vec<f64>>();
    let q = linear(&f64s(query), b * lq, &l.w[0], Some(&l.b[0]), H * D, E);
    let k = linear(&f64s(key), b * lk, &l.w[1], Some(&l.b[1]), HKV * D, kdim);
    let v = linear(&f64s(value), b * lk, &l.w[2], Some(&l.b[2]), HKV * D, vdim);
    let (q, k, v) = (
        split_heads(&q, b, lq, H),
        split_heads(&k, b, lk, HKV),
        split_heads(&v, b, lk, HKV),
    );
    let mut p = Problem::new(b, H, HKV, lq, lk, D, D, &q, &k, &v);
    p.causal = causal;
    let (o, _) = attention(&p);
    // [B, H, Lq, D] -> [B, Lq, H*D], then the output projection.
    let mut merged = vec![0.0; o.len()];
    for bi in 0..b {
        for h in 0..H {
            for li in 0..lq {
                for d in 0..D {
                    merged[((bi * lq + li) * H + h) * D + d] = o[((bi * H + h) * lq + li) * D + d];
                }
            }
        }
    }
    linear(&merged, b * lq, &l.w[3], Some(&l.b[3]), E, H * D)
}

#[test]
fn cross_attention_matches_the_composition() {
    let (b, lq, lk) = (2, 3, 5);
    let l = layer(21, KDIM, VDIM);
    let mut r = Rng::new(22);
    let (query, key, value) = (
        r.vec(b * lq * E),
        r.vec(b * lk * KDIM),
        r.vec(b * lk * VDIM),
    );
    let m = MultiheadAttention::new(&config(KDIM, VDIM), &weights(&l)).unwrap();
    let q = Tensor::new(&query, &[b, lq, E]).unwrap();
    let k = Tensor::new(&key, &[b, lk, KDIM]).unwrap();
    let v = Tensor::new(&value, &[b, lk, VDIM]).unwrap();
    let mut out = vec![0.0f32; b * lq * E];
    m.forward(
        &q,
        Some((&k, &v)),
        &mut TensorMut::new(&mut out, &[b, lq, E]).unwrap(),
        &SdpaOptions::new(),
    )
    .unwrap();
    let want = reference(
        &l,
        &query,
        &key,
        &value,
        b,
        lq,
        lk,
        KDIM,
        VDIM,
        RefCausal::None,
    );
    assert_close(&out, &want, 1e-4, "out");

    // A second identical call gives the same bits.
    let mut again = vec![0.0f32; b * lq * E];
    m.forward(
        &q,
        Some((&k, &v)),
        &mut TensorMut::new(&mut again, &[b, lq, E]).unwrap(),
        &SdpaOptions::new(),
    )
    .unwrap();
    assert_eq!(out, again);
}

#[test]
fn causal_self_attention_matches_the_composition() {
    let (b, l_) = (1, 7);
    let l = layer(23, E, E);
    let query = Rng::new(24).vec(b * l_ * E);
    let m = MultiheadAttention::new(&config(E, E), &weights(&l)).unwrap();
    let q = Tensor::new(&query, &[b, l_, E]).unwrap();
    let mut out = vec![0.0f32; b * l_ * E];
    let opts = SdpaOptions::new().causal(Causal::TopLeft);
    m.forward(
        &q,
        None,
        &mut TensorMut::new(&mut out, &[b, l_, E]).unwrap(),
        &opts,
    )
    .unwrap();
    let want = reference(
        &l,
        &query,
        &query,
        &query,
        b,
        l_,
        l_,
        E,
        E,
        RefCausal::TopLeft,
    );
    assert_close(&out, &want, 1e-4, "out");
}

#[test]
fn one_module_from_several_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<MultiheadAttention>();

    let (b, lq) = (2, 4);
    let l = layer(25, E, E);
    let m = MultiheadAttention::new(&config(E, E), &weights(&l)).unwrap();
    let inputs: Vec<Vec<f32>> = (0..4).map(|i| Rng::new(30 + i).vec(b * lq * E)).collect();
    let run = |x: &[f32]| {
        let mut out = vec![0.0f32; b * lq * E];
        let q = Tensor::new(x, &[b, lq, E]).unwrap();
        m.forward(
            &q,
            None,
            &mut TensorMut::new(&mut out, &[b, lq, E]).unwrap(),
            &SdpaOptions::new(),
        )
        .unwrap();
        out
    };
    let serial: Vec<Vec<f32>> = inputs.iter().map(|x| run(x)).collect();
    let parallel: Vec<Vec<f32>> = std::thread::scope(|s| {
        let handles: Vec<_> = inputs.iter().map(|x| s.spawn(|| run(x))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(serial, parallel);
    // The module moves to another thread and is dropped there.
    std::thread::spawn(move || drop(m)).join().unwrap();
}

#[test]
fn errors() {
    let l = layer(26, KDIM, VDIM);
    // w_k one element short: the binding's check, before C reads it.
    let mut w = weights(&l);
    w.w_k = &l.w[1][1..];
    let e = MultiheadAttention::new(&config(KDIM, VDIM), &w).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(
        e.message()
            .starts_with("w_k has 119 elements but [12, 10] needs 120"),
        "{}",
        e
    );
    // Some(0) would be read as the default by C.
    let cfg = MhaConfig {
        num_kv_heads: Some(0),
        ..config(KDIM, VDIM)
    };
    assert!(MultiheadAttention::new(&cfg, &weights(&l))
        .unwrap_err()
        .message()
        .contains("num_kv_heads"));
    // The library's own check: 3 K/V heads do not divide 4 query heads.
    let l3 = Layer {
        w: [
            l.w[0].clone(),
            Rng::new(1).vec(3 * D * KDIM),
            Rng::new(2).vec(3 * D * VDIM),
            l.w[3].clone(),
        ],
        b: [
            l.b[0].clone(),
            vec![0.0; 3 * D],
            vec![0.0; 3 * D],
            l.b[3].clone(),
        ],
    };
    let cfg = MhaConfig {
        num_kv_heads: Some(3),
        ..config(KDIM, VDIM)
    };
    let e = MultiheadAttention::new(&cfg, &weights(&l3)).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("num_kv_heads"), "{}", e.message());

    // Forward: self-attention needs kdim == vdim == embed_dim; nothing written.
    let m = MultiheadAttention::new(&config(KDIM, VDIM), &weights(&l)).unwrap();
    let query = vec![0.5f32; 2 * E];
    let mut out = vec![9.0f32; 2 * E];
    let q = Tensor::new(&query, &[1, 2, E]).unwrap();
    let e = m
        .forward(
            &q,
            None,
            &mut TensorMut::new(&mut out, &[1, 2, E]).unwrap(),
            &SdpaOptions::new(),
        )
        .unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(out.iter().all(|&o| o == 9.0));
    // Sinks shorter than num_heads: the binding's check.
    let m = MultiheadAttention::new(&config(E, E), &weights(&layer(27, E, E))).unwrap();
    let e = m
        .forward(
            &q,
            None,
            &mut TensorMut::new(&mut out, &[1, 2, E]).unwrap(),
            &SdpaOptions::new().sinks(&[0.0; H - 1]),
        )
        .unwrap_err();
    assert!(
        e.message()
            .contains("sinks has 3 elements but the number of query heads is 4"),
        "{}",
        e
    );
    assert!(out.iter().all(|&o| o == 9.0));
}
