// SPDX-License-Identifier: Apache-2.0
//
// The tests' independent opinion: attention in f64 with a naive two-pass
// softmax, written from include/hwyattn.h's definitions (not from the
// library's code), and a small deterministic random generator.

#![allow(dead_code)]

/// xorshift64*: uniform values in [-1, 1).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40; // 24 bits
        (x as f32) / (1u64 << 23) as f32 - 1.0
    }
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.uniform()).collect()
    }
}

#[derive(Clone, Copy, PartialEq)]
pub enum RefCausal {
    None,
    TopLeft,
    BottomRight,
}

/// A problem for the reference: dense [B, H, L, D] arrays (k and v may have
/// batch 1, shared by all B).
pub struct Problem<'a> {
    pub b: usize,
    pub hq: usize,
    pub hkv: usize,
    pub lq: usize,
    pub lk: usize,
    pub d: usize,
    pub dv: usize,
    pub kv_batch: usize, // b or 1
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub scale: f64,
    pub causal: RefCausal,
    pub window_left: usize, // 0 = none
    pub window_right: usize,
    pub softcap: f64, // 0 = none
    pub alibi: Option<&'a [f32]>,
    pub sinks: Option<&'a [f32]>,
    pub kv_len: Option<&'a [i32]>,
    /// [Lq, Lk], true = attend.
    pub bool_mask: Option<&'a [bool]>,
}

impl<'a> Problem<'a> {
    pub fn new(
        b: usize,
        hq: usize,
        hkv: usize,
        lq: usize,
        lk: usize,
        d: usize,
        dv: usize,
        q: &'a [f32],
        k: &'a [f32],
        v: &'a [f32],
    ) -> Problem<'a> {
        Problem {
            b,
            hq,
            hkv,
            lq,
            lk,
            d,
            dv,
            kv_batch: b,
            q,
            k,
            v,
            scale: 1.0 / (d as f64).sqrt(),
            causal: RefCausal::None,
            window_left: 0,
            window_right: 0,
            softcap: 0.0,
            alibi: None,
            sinks: None,
            kv_len: None,
            bool_mask: None,
        }
    }
}

/// Returns (out [B, Hq, Lq, Dv], lse [B, Hq, Lq]).
pub fn attention(p: &Problem) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; p.b * p.hq * p.lq * p.dv];
    let mut lse = vec![0.0; p.b * p.hq * p.lq];
    let group = p.hq / p.hkv;
    for b in 0..p.b {
        let kb = if p.kv_batch == 1 { 0 } else { b };
        for h in 0..p.hq {
            let hk = h / group;
            for i in 0..p.lq {
                let pos = if p.causal == RefCausal::BottomRight {
                    i + p.lk - p.lq
                } else {
                    i
                } as i64;
                let qrow = &p.q[((b * p.hq + h) * p.lq + i) * p.d..][..p.d];
                let mut scores: Vec<Option<f64>> = Vec::with_capacity(p.lk);
                for j in 0..p.lk {
                    let jj = j as i64;
                    let mut visible = match p.causal {
                        RefCausal::None => true,
                        RefCausal::TopLeft => j <= i,
                        RefCausal::BottomRight => j + p.lq <= i + p.lk,
                    };
                    if p.window_left > 0 && jj <= pos - p.window_left as i64 {
                        visible = false;
                    }
                    if p.window_right > 0 && jj >= pos + p.window_right as i64 {
                        visible = false;
                    }
                    if let Some(kv) = p.kv_len {
                        if j >= kv[b] as usize {
                            visible = false;
                        }
                    }
                    if let Some(m) = p.bool_mask {
                        if !m[i * p.lk + j] {
                            visible = false;
                        }
                    }
                    if !visible {
                        scores.push(None);
                        continue;
                    }
                    let krow = &p.k[((kb * p.hkv + hk) * p.lk + j) * p.d..][..p.d];
                    let dot: f64 = qrow
                        .iter()
                        .zip(krow)
                        .map(|(&a, &c)| a as f64 * c as f64)
                        .sum();
                    let mut s = dot * p.scale;
                    if p.softcap > 0.0 {
                        s = p.softcap * (s / p.softcap).tanh();
                    }
                    if let Some(a) = p.alibi {
                        s += a[h] as f64 * (jj - pos) as f64;
                    }
                    scores.push(Some(s));
                }
                let sink = p.sinks.map(|s| s[h] as f64);
                let mut m = sink.unwrap_or(f64::NEG_INFINITY);
                for s in scores.iter().flatten() {
                    m = m.max(*s);
                }
                let row = (b * p.hq + h) * p.lq + i;
                if m == f64::NEG_INFINITY {
                    lse[row] = f64::NEG_INFINITY;
                    continue;
                }
                let mut denom: f64 = scores.iter().flatten().map(|s| (s - m).exp()).sum();
                if let Some(s) = sink {
                    denom += (s - m).exp();
                }
                lse[row] = m + denom.ln();
                for (j, s) in scores.iter().enumerate() {
                    if let Some(s) = s {
                        let w = (s - lse[row]).exp();
                        let vrow = &p.v[((kb * p.hkv + hk) * p.lk + j) * p.dv..][..p.dv];
                        for (o, &x) in out[row * p.dv..][..p.dv].iter_mut().zip(vrow) {
                            *o += w * x as f64;
                        }
                    }
                }
            }
        }
    }
    (out, lse)
}

/// Asserts |got - want| <= tol * (1 + |want|) everywhere (infinities equal).
pub fn assert_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{}: length", what);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_infinite() {
            g as f64 == w
        } else {
            (g as f64 - w).abs() <= tol * (1.0 + w.abs())
        };
        assert!(ok, "{}[{}]: got {} want {}", what, i, g, w);
    }
}

/// y [rows, out] = x [rows, in] W^T + b, in f64 (torch nn.Linear).
pub fn linear(
    x: &[f64],
    rows: usize,
    w: &[f32],
    bias: Option<&[f32]>,
    out_f: usize,
    in_f: usize,
) -> Vec<f64> {
    let mut y = vec![0.0; rows * out_f];
    for r in 0..rows {
        for o in 0..out_f {
            let mut acc = bias.map_or(0.0, |b| b[o] as f64);
            for c in 0..in_f {
                acc += x[r * in_f + c] * w[o * in_f + c] as f64;
            }
            y[r * out_f + o] = acc;
        }
    }
    y
}
