// SPDX-License-Identifier: Apache-2.0
//
// kv_cache_write and kv_attention against an f64 oracle written here from
// include/hwyattn.h's rules: the pages the write leaves (exact f32, bf16
// rounded by hand, i8 and int4 within half a quantization step, ggml's
// blocks decoded here from their bytes) and attention of mixed batches
// (chunked prefill, decode, full prefill) over paged and contiguous caches;
// Precision::Int8 against F32 (the header's bound; F32 on a float K);
// errors from the library and from the crate.

mod common;

use common::{assert_close, Rng};
use hwyattn::{
    kv_attention, kv_cache_write, Bf16, BlockIQ4NL, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1,
    BlockQ8_0, CacheElement, Causal, I4x2, KvBatch, KvCache, KvScale, Precision, SdpaOptions,
    Status, Tensor, TensorMut, F8E5M2,
};

#[derive(Default)]
struct RefOpts {
    scale: f64, // 0 = 1/sqrt(D)
    causal: bool,
    window_left: i64,
    window_right: i64,
    softcap: f64,
    alibi: Option<Vec<f64>>,
    sinks: Option<Vec<f64>>,
}

/// out [T, Hq, Dv] and lse [T, Hq]; key(s, t, h, d) / val(..) are the
/// (dequantized) cache values of sequence s's key t at kv head h.
#[allow(clippy::too_many_arguments)]
fn reference(
    q: &[f32],
    hq: usize,
    hkv: usize,
    d: usize,
    dv: usize,
    key: &dyn Fn(usize, usize, usize, usize) -> f64,
    val: &dyn Fn(usize, usize, usize, usize) -> f64,
    q_start: &[i32],
    kv_len: &[i32],
    q_pos: Option<&[i32]>,
    o: &RefOpts,
) -> (Vec<f64>, Vec<f64>) {
    let t_all = *q_start.last().unwrap() as usize;
    let scale = if o.scale == 0.0 {
        1.0 / (d as f64).sqrt()
    } else {
        o.scale
    };
    let mut out = vec![0.0; t_all * hq * dv];
    let mut lse = vec![0.0; t_all * hq];
    for s in 0..kv_len.len() {
        let (q0, n) = (q_start[s] as usize, kv_len[s] as usize);
        let q_len = q_start[s + 1] as usize - q0;
        let first = q_pos.map_or(n as i64 - q_len as i64, |p| p[s] as i64);
        for h in 0..hq {
            let hk = h / (hq / hkv);
            let sink = o.sinks.as_ref().map_or(f64::NEG_INFINITY, |x| x[h]);
            for i in 0..q_len {
                let pos = first + i as i64;
                let mut keys = Vec::new();
                for t in 0..n {
                    let ti = t as i64;
                    if (o.causal && ti > pos)
                        || (o.window_left > 0 && ti <= pos - o.window_left)
                        || (o.window_right > 0 && ti >= pos + o.window_right)
                    {
                        continue;
                    }
                    let mut x = 0.0;
                    for c in 0..d {
                        x += q[((q0 + i) * hq + h) * d + c] as f64 * key(s, t, hk, c);
                    }
                    x *= scale;
                    if o.softcap > 0.0 {
                        x = o.softcap * (x / o.softcap).tanh();
                    }
                    if let Some(a) = &o.alibi {
                        x += a[h] * (ti - pos) as f64;
                    }
                    keys.push((t, x));
                }
                let row = (q0 + i) * hq + h;
                if keys.is_empty() {
                    lse[row] = sink;
                    continue;
                }
                let m = keys.iter().fold(sink, |m, &(_, x)| m.max(x));
                let mut sum: f64 = keys.iter().map(|&(_, x)| (x - m).exp()).sum();
                if sink > f64::NEG_INFINITY {
                    sum += (sink - m).exp();
                }
                lse[row] = m + sum.ln();
                for &(t, x) in &keys {
                    let w = (x - lse[row]).exp();
                    for c in 0..dv {
                        out[row * dv + c] += w * val(s, t, hk, c);
                    }
                }
            }
        }
    }
    (out, lse)
}

/// One step: sequences with kv_len keys (this step's included) of which
/// q_len are new; raw keys/values [len, Hkv, D] and the queries [T, Hq, D].
struct Step {
    hkv: usize,
    d: usize,
    dv: usize,
    kv_len: Vec<i32>,
    q_len: Vec<i32>,
    q_start: Vec<i32>,
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    q: Vec<f32>,
    t: usize,
}

impl Step {
    fn new(
        seed: u64,
        hq: usize,
        hkv: usize,
        d: usize,
        dv: usize,
        kv_len: &[i32],
        q_len: &[i32],
    ) -> Step {
        let mut r = Rng::new(seed);
        let mut q_start = vec![0];
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for s in 0..kv_len.len() {
            let n = kv_len[s] as usize;
            k.push(r.vec(n * hkv * d).iter().map(|x| 2.0 * x).collect());
            v.push(r.vec(n * hkv * dv).iter().map(|x| 2.0 * x).collect());
            q_start.push(q_start[s] + q_len[s]);
        }
        let t = *q_start.last().unwrap() as usize;
        let q = r.vec(t * hq * d);
        Step {
            hkv,
            d,
            dv,
            kv_len: kv_len.to_vec(),
            q_len: q_len.to_vec(),
            q_start,
            k,
            v,
            q,
            t,
        }
    }

    fn raw(&self, values: bool, s: usize, t: usize, h: usize, c: usize) -> f64 {
        if values {
            self.v[s][(t * self.hkv + h) * self.dv + c] as f64
        } else {
            self.k[s][(t * self.hkv + h) * self.d + c] as f64
        }
    }

    /// Writes every token: the history in one call, this step's tokens in
    /// another, each with a skipped token (slot -1) of huge values.
    fn write<T: hwyattn::CacheElement>(
        &self,
        cache: &mut KvCache<'_, T>,
        slot: &dyn Fn(usize, usize) -> i64,
    ) {
        for pass in 0..2 {
            let (mut kn, mut vn, mut slots) = (Vec::new(), Vec::new(), Vec::new());
            for s in 0..self.kv_len.len() {
                let first_new = (self.kv_len[s] - self.q_len[s]) as usize;
                let range = if pass == 0 {
                    0..first_new
                } else {
                    first_new..self.kv_len[s] as usize
                };
                for t in range {
                    kn.extend_from_slice(
                        &self.k[s][t * self.hkv * self.d..(t + 1) * self.hkv * self.d],
                    );
                    vn.extend_from_slice(
                        &self.v[s][t * self.hkv * self.dv..(t + 1) * self.hkv * self.dv],
                    );
                    slots.push(slot(s, t));
                }
            }
            kn.extend(std::iter::repeat(1e6f32).take(self.hkv * self.d));
            vn.extend(std::iter::repeat(1e6f32).take(self.hkv * self.dv));
            slots.push(-1);
            let n = slots.len();
            kv_cache_write(
                cache,
                &Tensor::new(&kn, &[n, self.hkv, self.d]).unwrap(),
                &Tensor::new(&vn, &[n, self.hkv, self.dv]).unwrap(),
                &slots,
            )
            .unwrap();
        }
    }
}

/// Each sequence's pages from a shuffled pool; a block table with a spare
/// column, padded with -1. Returns (table, stride).
fn paging(seed: u64, kv_len: &[i32], page: usize, pages: usize) -> (Vec<i32>, usize) {
    let need: Vec<usize> = kv_len
        .iter()
        .map(|&n| (n as usize + page - 1) / page)
        .collect();
    let stride = need.iter().max().unwrap() + 1;
    let mut pool: Vec<i32> = (0..pages as i32).collect();
    let mut r = Rng::new(seed);
    for i in (1..pool.len()).rev() {
        let j = ((r.uniform() as f64 + 1.0) / 2.0 * (i + 1) as f64) as usize;
        pool.swap(i, j.min(i));
    }
    let mut table = vec![-1; kv_len.len() * stride];
    let mut next = 0;
    for (s, &c) in need.iter().enumerate() {
        for j in 0..c {
            table[s * stride + j] = pool[next];
            next += 1;
        }
    }
    (table, stride)
}

const TOL: f64 = 1e-5;

#[test]
fn paged_f32_mixed_batch_with_modifiers() {
    // A chunked prefill (3 new of 9), a decode, a one-token prompt, a full
    // prefill; GQA 4 over 2 heads, D 8, Dv 6, pages of 4.
    let st = Step::new(21, 4, 2, 8, 6, &[9, 6, 1, 7], &[3, 1, 1, 7]);
    let (p, sz) = (11, 4);
    let (table, stride) = paging(5, &st.kv_len, sz, p);
    let slot = |s: usize, t: usize| table[s * stride + t / sz] as i64 * sz as i64 + (t % sz) as i64;
    let mut kp = vec![0.0f32; p * 2 * sz * 8];
    let mut vp = vec![0.0f32; p * 2 * sz * 6];
    let mut cache = KvCache::new(&mut kp, &mut vp, p, 2, sz, 8, 6)
        .unwrap()
        .block_table(&table, stride);
    st.write(&mut cache, &slot);

    let mut written = 0;
    {
        let (kp, vp) = cache.pages();
        for s in 0..st.kv_len.len() {
            for t in 0..st.kv_len[s] as usize {
                let (page, off) = (slot(s, t) as usize / sz, slot(s, t) as usize % sz);
                for h in 0..2 {
                    for c in 0..8 {
                        assert_eq!(
                            kp[((page * 2 + h) * sz + off) * 8 + c] as f64,
                            st.raw(false, s, t, h, c)
                        );
                    }
                    for c in 0..6 {
                        assert_eq!(
                            vp[((page * 2 + h) * sz + off) * 6 + c] as f64,
                            st.raw(true, s, t, h, c)
                        );
                    }
                }
                written += 1;
            }
        }
        let nonzero = kp.iter().filter(|&&x| x != 0.0).count();
        assert_eq!(
            nonzero,
            written * 2 * 8,
            "only the written slots changed (not the skipped token)"
        );
    }

    let slopes = [0.25f32, -0.5, 0.125, 0.0];
    let sinks = [0.5f32, -1.0, 2.0, -3.0];
    let mut out = vec![0.0f32; st.t * 4 * 6];
    let mut lse = vec![0.0f32; st.t * 4];
    let batch = KvBatch::new(&st.q_start, &st.kv_len).unwrap();
    {
        let opts = SdpaOptions::new()
            .scale(Some(0.3))
            .causal(Causal::BottomRight)
            .window_left(5)
            .softcap(1.5)
            .alibi_slopes(&slopes)
            .sinks(&sinks)
            .lse(TensorMut::new(&mut lse, &[st.t, 4]).unwrap());
        kv_attention(
            &Tensor::new(&st.q, &[st.t, 4, 8]).unwrap(),
            &cache,
            &batch,
            &mut TensorMut::new(&mut out, &[st.t, 4, 6]).unwrap(),
            &opts,
        )
        .unwrap();
    }
    let key = |s: usize, t: usize, h: usize, c: usize| st.raw(false, s, t, h, c);
    let val = |s: usize, t: usize, h: usize, c: usize| st.raw(true, s, t, h, c);
    let ro = RefOpts {
        scale: 0.3f32 as f64,
        causal: true,
        window_left: 5,
        softcap: 1.5,
        alibi: Some(slopes.iter().map(|&x| x as f64).collect()),
        sinks: Some(sinks.iter().map(|&x| x as f64).collect()),
        ..Default::default()
    };
    let (want, want_lse) = reference(
        &st.q,
        4,
        2,
        8,
        6,
        &key,
        &val,
        &st.q_start,
        &st.kv_len,
        None,
        &ro,
    );
    assert_close(&out, &want, TOL, "out");
    assert_close(&lse, &want_lse, TOL, "lse");

    // Defaults (scale None = 1/sqrt(D), no causal rule) with explicit positions.
    let q_pos = [2, 5, 0, 0];
    let batch = batch.q_pos(&q_pos).unwrap();
    kv_attention(
        &Tensor::new(&st.q, &[st.t, 4, 8]).unwrap(),
        &cache,
        &batch,
        &mut TensorMut::new(&mut out, &[st.t, 4, 6]).unwrap(),
        &SdpaOptions::new().window_right(2),
    )
    .unwrap();
    let ro = RefOpts {
        window_right: 2,
        ..Default::default()
    };
    let (want, _) = reference(
        &st.q,
        4,
        2,
        8,
        6,
        &key,
        &val,
        &st.q_start,
        &st.kv_len,
        Some(&q_pos),
        &ro,
    );
    assert_close(&out, &want, TOL, "out with q_pos");
}

#[test]
fn contiguous_bf16_in_flash_attention_layout() {
    // No block table: sequence s is page s (page_size 12, each sequence's
    // capacity). Memory [pages, slot, Hkv, D] described with strides.
    let st = Step::new(22, 6, 3, 16, 16, &[12, 4, 7], &[2, 1, 7]);
    let (p, sz, h, d) = (3, 12, 3, 16);
    let strides = [sz * h * d, d, h * d, 1];
    let mut kp = vec![Bf16(0xFFFF); p * sz * h * d];
    let mut vp = kp.clone();
    let mut cache = KvCache::with_strides(
        &mut kp,
        &[p, h, sz, d],
        &strides,
        &mut vp,
        &[p, h, sz, d],
        &strides,
    )
    .unwrap();
    st.write(&mut cache, &|s, t| (s * sz + t) as i64);
    let at = |s: usize, t: usize, hh: usize, c: usize| ((s * sz + t) * h + hh) * d + c;
    // bf16 by hand: round to nearest, ties to even (finite values).
    let to_bf16 = |x: f64| {
        let b = (x as f32).to_bits();
        ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
    };
    let (kq, vq) = cache.pages();
    for s in 0..st.kv_len.len() {
        for t in 0..st.kv_len[s] as usize {
            for hh in 0..h {
                for c in 0..d {
                    assert_eq!(kq[at(s, t, hh, c)].0, to_bf16(st.raw(false, s, t, hh, c)));
                    assert_eq!(vq[at(s, t, hh, c)].0, to_bf16(st.raw(true, s, t, hh, c)));
                }
            }
        }
    }
    let key = |s: usize, t: usize, hh: usize, c: usize| kq[at(s, t, hh, c)].to_f32() as f64;
    let val = |s: usize, t: usize, hh: usize, c: usize| vq[at(s, t, hh, c)].to_f32() as f64;
    let mut out = vec![0.0f32; st.t * 6 * 16];
    let batch = KvBatch::new(&st.q_start, &st.kv_len).unwrap();
    kv_attention(
        &Tensor::new(&st.q, &[st.t, 6, 16]).unwrap(),
        &cache,
        &batch,
        &mut TensorMut::new(&mut out, &[st.t, 6, 16]).unwrap(),
        &SdpaOptions::new().causal(Causal::TopLeft),
    )
    .unwrap();
    let ro = RefOpts {
        causal: true,
        ..Default::default()
    };
    let (want, _) = reference(
        &st.q,
        6,
        3,
        16,
        16,
        &key,
        &val,
        &st.q_start,
        &st.kv_len,
        None,
        &ro,
    );
    assert_close(&out, &want, TOL, "out");
}

#[test]
fn paged_i8_per_token_and_per_channel_scales() {
    let st = Step::new(23, 2, 1, 8, 4, &[10, 3], &[1, 3]);
    let (p, sz) = (6, 4);
    let (table, stride) = paging(9, &st.kv_len, sz, p);
    let slot = |s: usize, t: usize| table[s * stride + t / sz] as i64 * sz as i64 + (t % sz) as i64;
    let mut kp = vec![0i8; p * sz * 8];
    let mut vp = vec![0i8; p * sz * 4];
    let mut ks = vec![0.0f32; p * sz];
    let vs = [0.004f32, 0.008, 0.012, 0.016];
    let mut cache = KvCache::new(&mut kp, &mut vp, p, 1, sz, 8, 4)
        .unwrap()
        .scales(KvScale::PerToken(&mut ks), KvScale::PerChannel(&vs))
        .unwrap()
        .block_table(&table, stride);
    st.write(&mut cache, &slot);
    let mut out = vec![0.0f32; st.t * 2 * 4];
    let batch = KvBatch::new(&st.q_start, &st.kv_len).unwrap();
    kv_attention(
        &Tensor::new(&st.q, &[st.t, 2, 8]).unwrap(),
        &cache,
        &batch,
        &mut TensorMut::new(&mut out, &[st.t, 2, 4]).unwrap(),
        &SdpaOptions::new()
            .scale(Some(0.5))
            .causal(Causal::BottomRight),
    )
    .unwrap();
    let (kq, vq) = cache.pages();
    let (kq, vq) = (kq.to_vec(), vq.to_vec());
    drop(cache);
    for s in 0..st.kv_len.len() {
        for t in 0..st.kv_len[s] as usize {
            let sl = slot(s, t) as usize;
            let amax = (0..8)
                .map(|c| st.raw(false, s, t, 0, c).abs())
                .fold(0.0, f64::max);
            assert_eq!(
                ks[sl],
                amax as f32 / 127.0,
                "scale of seq {} token {}",
                s,
                t
            );
            for c in 0..8 {
                let e = (kq[sl * 8 + c] as f64 * ks[sl] as f64 - st.raw(false, s, t, 0, c)).abs();
                assert!(
                    e <= amax / 254.0 * 1.0001,
                    "seq {} token {} k[{}] off by {}",
                    s,
                    t,
                    c,
                    e
                );
            }
            for c in 0..4 {
                let x = st.raw(true, s, t, 0, c) / vs[c] as f64;
                let mut want = x.round(); // half away from zero; ties go to even:
                if (x - x.trunc()).abs() == 0.5 {
                    want = 2.0 * (x / 2.0).round();
                }
                assert_eq!(
                    vq[sl * 4 + c] as f64,
                    want.clamp(-127.0, 127.0),
                    "seq {} token {} v[{}]",
                    s,
                    t,
                    c
                );
            }
        }
    }
    let key = |s: usize, t: usize, _h: usize, c: usize| {
        let sl = slot(s, t) as usize;
        kq[sl * 8 + c] as f64 * ks[sl] as f64
    };
    let val = |s: usize, t: usize, _h: usize, c: usize| {
        vq[slot(s, t) as usize * 4 + c] as f64 * vs[c] as f64
    };
    let ro = RefOpts {
        scale: 0.5,
        causal: true,
        ..Default::default()
    };
    let (want, _) = reference(
        &st.q,
        2,
        1,
        8,
        4,
        &key,
        &val,
        &st.q_start,
        &st.kv_len,
        None,
        &ro,
    );
    assert_close(&out, &want, TOL, "out");
}

// An E5M2 cache with per-kv-head K scales and a per-tensor V scale: the
// written bytes hold x / scale within half a step of E5M2 (2 mantissa bits:
// 1/8 of the value), and attention matches the oracle over the decoded
// pages (the crate's own decoder, F8E5M2::to_f32, checked on hand values).
#[test]
fn paged_fp8_per_head_and_per_tensor_scales() {
    assert_eq!(F8E5M2(0x3c).to_f32(), 1.0);
    assert_eq!(F8E5M2(0x7b).to_f32(), 57344.0);
    assert_eq!(F8E5M2(0x01).to_f32(), 2f32.powi(-16));
    assert_eq!(F8E5M2(0xfc).to_f32(), f32::NEG_INFINITY);
    let st = Step::new(29, 2, 1, 8, 4, &[10, 3], &[1, 3]);
    let (p, sz) = (6, 4);
    let (table, stride) = paging(11, &st.kv_len, sz, p);
    let slot = |s: usize, t: usize| table[s * stride + t / sz] as i64 * sz as i64 + (t % sz) as i64;
    let mut kp = vec![F8E5M2(0); p * sz * 8];
    let mut vp = vec![F8E5M2(0); p * sz * 4];
    let (ks, vs) = ([0.01f32], [0.02f32]);
    let mut cache = KvCache::new(&mut kp, &mut vp, p, 1, sz, 8, 4)
        .unwrap()
        .scales(KvScale::PerHead(&ks), KvScale::PerTensor(&vs))
        .unwrap()
        .block_table(&table, stride);
    st.write(&mut cache, &slot);
    let mut out = vec![0.0f32; st.t * 2 * 4];
    let batch = KvBatch::new(&st.q_start, &st.kv_len).unwrap();
    kv_attention(
        &Tensor::new(&st.q, &[st.t, 2, 8]).unwrap(),
        &cache,
        &batch,
        &mut TensorMut::new(&mut out, &[st.t, 2, 4]).unwrap(),
        &SdpaOptions::new().causal(Causal::BottomRight),
    )
    .unwrap();
    let (kq, vq) = cache.pages();
    let (kq, vq) = (kq.to_vec(), vq.to_vec());
    drop(cache);
    for s in 0..st.kv_len.len() {
        for t in 0..st.kv_len[s] as usize {
            let sl = slot(s, t) as usize;
            for c in 0..8 {
                let x = st.raw(false, s, t, 0, c) / ks[0] as f64;
                let got = kq[sl * 8 + c].to_f32() as f64;
                let bound = x.abs() / 8.0 + 2f64.powi(-17); // half a step, subnormals too
                assert!((got - x).abs() <= bound, "k seq {} token {} [{}]", s, t, c);
            }
        }
    }
    let key = |s: usize, t: usize, _h: usize, c: usize| {
        kq[slot(s, t) as usize * 8 + c].to_f32() as f64 * ks[0] as f64
    };
    let val = |s: usize, t: usize, _h: usize, c: usize| {
        vq[slot(s, t) as usize * 4 + c].to_f32() as f64 * vs[0] as f64
    };
    let ro = RefOpts {
        scale: 1.0 / 8f64.sqrt(),
        causal: true,
        ..Default::default()
    };
    let (want, _) = reference(
        &st.q,
        2,
        1,
        8,
        4,
        &key,
        &val,
        &st.q_start,
        &st.kv_len,
        None,
        &ro,
    );
    assert_close(&out, &want, TOL, "out");
}

#[test]
fn errors_name_the_argument_and_write_nothing() {
    let mut kp = vec![0.0f32; 4 * 4 * 4];
    let mut vp = kp.clone();
    let table = [0, 1, 99, -1];
    let mut cache = KvCache::new(&mut kp, &mut vp, 4, 1, 4, 4, 4)
        .unwrap()
        .block_table(&table, 2);
    let q = vec![0.5f32; 2 * 2 * 4];
    let qv = Tensor::new(&q, &[2, 2, 4]).unwrap();
    let mut out = vec![-7.0f32; 2 * 2 * 4];
    let (q_start, kv_len) = ([0, 1, 2], [5, 2]);
    let batch = KvBatch::new(&q_start, &kv_len).unwrap();

    // The library's message: a page outside the pool.
    let e = kv_attention(
        &qv,
        &cache,
        &batch,
        &mut TensorMut::new(&mut out, &[2, 2, 4]).unwrap(),
        &SdpaOptions::new().causal(Causal::BottomRight),
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(
        e.message().contains("block_table[1][0]") && e.message().contains("99"),
        "{}",
        e
    );

    let kn = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let knv = Tensor::new(&kn, &[2, 1, 4]).unwrap();
    for (slots, want) in [
        (&[5i64, 5][..], "slot"),
        (&[0, 16][..], "slot"),
        (&[0][..], "slots has 1 entries but k_new has 2 tokens"),
    ] {
        let e = kv_cache_write(&mut cache, &knv, &knv, slots).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(e.message().contains(want), "{:?}: {}", slots, e);
    }
    assert!(
        cache.pages().0.iter().all(|&x| x == 0.0),
        "a failed write wrote the cache"
    );

    let mut attend = |cache: &KvCache<'_, f32>, batch: &KvBatch<'_>, opts: &SdpaOptions<'_>| {
        kv_attention(
            &qv,
            cache,
            batch,
            &mut TensorMut::new(&mut out, &[2, 2, 4]).unwrap(),
            opts,
        )
        .unwrap_err()
    };
    let zero = attend(&cache, &batch, &SdpaOptions::new().scale(Some(0.0)));
    assert!(zero.message().starts_with("scale is Some(0.0)"), "{}", zero);
    let kv = [5, 2];
    let one_mask = [true];
    let masked = attend(
        &cache,
        &batch,
        &SdpaOptions::new()
            .mask(Tensor::new(&one_mask, &[1]).unwrap())
            .kv_len(&kv),
    );
    assert_eq!(masked.status(), Status::InvalidArgument);
    assert!(
        masked.message().contains("mask") || masked.message().contains("kv_len"),
        "{}",
        masked
    );
    let sinks = [0.0f32];
    let short = attend(&cache, &batch, &SdpaOptions::new().sinks(&sinks));
    assert!(
        short.message().contains("sinks has 1 elements"),
        "{}",
        short
    );
    let short_table = [0, 1];
    let mut kp2 = vec![0.0f32; 64];
    let mut vp2 = kp2.clone();
    let c2 = KvCache::new(&mut kp2, &mut vp2, 4, 1, 4, 4, 4)
        .unwrap()
        .block_table(&short_table, 2);
    let e = attend(&c2, &batch, &SdpaOptions::new());
    assert!(
        e.message().starts_with("block_table has 2 entries"),
        "{}",
        e
    );
    drop(attend);
    assert!(out.iter().all(|&x| x == -7.0), "a failed call wrote out");

    // The crate's own shape checks.
    assert!(KvBatch::new(&[0, 1], &[5, 2])
        .unwrap_err()
        .message()
        .contains("q_start has 2 entries for 2 sequences"));
    assert!(batch
        .q_pos(&[0])
        .unwrap_err()
        .message()
        .contains("q_pos has 1 entries"));
    let mut small = vec![0.0f32; 10];
    let mut vsmall = vec![0.0f32; 64];
    let e = KvCache::new(&mut small, &mut vsmall, 4, 1, 4, 4, 4).unwrap_err();
    assert!(e.message().starts_with("k: "), "{}", e);
    let mut k8 = vec![0i8; 64];
    let mut v8 = vec![0i8; 64];
    let mut few = vec![0.0f32; 3];
    let e = KvCache::new(&mut k8, &mut v8, 4, 1, 4, 4, 4)
        .unwrap()
        .scales(KvScale::PerToken(&mut few), KvScale::PerChannel(&[1.0; 4]))
        .unwrap_err();
    assert!(e.message().starts_with("k_scale: "), "{}", e);
    // An i8 cache without scales: the library says so.
    let c8 = KvCache::new(&mut k8, &mut v8, 4, 1, 4, 4, 4)
        .unwrap()
        .block_table(&[0, 1, 2, -1], 2);
    let mut out8 = vec![0.0f32; 16];
    let e = kv_attention(
        &qv,
        &c8,
        &batch,
        &mut TensorMut::new(&mut out8, &[2, 2, 4]).unwrap(),
        &SdpaOptions::new(),
    )
    .unwrap_err();
    assert!(e.message().contains("scale"), "{}", e);
}

/// An IEEE binary16's value.
fn f16_value(bits: u16) -> f64 {
    let (e, m) = ((bits >> 10) & 31, (bits & 1023) as f64);
    let mag = match e {
        0 => m * 2f64.powi(-24),
        31 if m == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + m / 1024.0) * 2f64.powi(e as i32 - 15),
    };
    if bits >> 15 == 1 {
        -mag
    } else {
        mag
    }
}

const IQ4_NL_LEVELS: [i32; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// Element j of a ggml block `b` of format `name`, from include/hwyattn.h's
/// table: an fp16 d (and m) in the machine's byte order; element j < 16 the
/// low nibble of qs[j], j + 16 its high nibble; Q5's fifth bit j bit j of
/// the little-endian 32-bit qh.
fn block_element(name: &str, b: &[u8], j: usize) -> f64 {
    let half = |at: usize| f16_value(u16::from_ne_bytes([b[at], b[at + 1]]));
    let d = half(0);
    if name == "q8_0" {
        return d * b[2 + j] as i8 as f64;
    }
    let qs = &b[b.len() - 16..];
    let mut q = if j < 16 { qs[j] & 15 } else { qs[j - 16] >> 4 } as i32;
    if name == "q5_0" || name == "q5_1" {
        let at = if name == "q5_1" { 4 } else { 2 };
        let qh = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        q |= (((qh >> j) & 1) << 4) as i32;
    }
    match name {
        "q4_0" => d * (q - 8) as f64,
        "q5_0" => d * (q - 16) as f64,
        "iq4_nl" => d * IQ4_NL_LEVELS[q as usize] as f64,
        // q4_1, q5_1: d * q + m, rounded once to f32.
        _ => (d * q as f64 + half(2)) as f32 as f64,
    }
}

/// A paged cache of ggml blocks `B` (pools allocated as bytes, viewed as
/// blocks): the write, attention of a mixed batch, and the reference over
/// the pages decoded here; each value within a step of its block's largest
/// input magnitude.
fn ggml_block_case<B: CacheElement>(
    name: &str,
    wrap: fn(&mut [u8]) -> hwyattn::Result<&mut [B]>,
    step: f64,
    seed: u64,
) {
    let bb = std::mem::size_of::<B>();
    let (hq, hkv, d, dv) = (4, 2, 64, 32);
    let st = Step::new(seed, hq, hkv, d, dv, &[9, 6, 1, 7], &[3, 1, 1, 7]);
    let (p, sz) = (11, 4);
    let (table, stride) = paging(seed, &st.kv_len, sz, p);
    let slot = |s: usize, t: usize| table[s * stride + t / sz] as i64 * sz as i64 + (t % sz) as i64;
    let mut kb = vec![0u8; B::pages_len(p, hkv, sz, d).unwrap() * bb];
    let mut vb = vec![0u8; B::pages_len(p, hkv, sz, dv).unwrap() * bb];
    assert_eq!(kb.len(), p * hkv * sz * d / 32 * bb);
    let mut out = vec![0.0f32; st.t * hq * dv];
    {
        let mut cache = KvCache::new(
            wrap(&mut kb).unwrap(),
            wrap(&mut vb).unwrap(),
            p,
            hkv,
            sz,
            d,
            dv,
        )
        .unwrap()
        .block_table(&table, stride);
        st.write(&mut cache, &slot);
        let batch = KvBatch::new(&st.q_start, &st.kv_len).unwrap();
        kv_attention(
            &Tensor::new(&st.q, &[st.t, hq, d]).unwrap(),
            &cache,
            &batch,
            &mut TensorMut::new(&mut out, &[st.t, hq, dv]).unwrap(),
            &SdpaOptions::new().causal(Causal::BottomRight),
        )
        .unwrap();
    }
    // Element c of the row of (s, t, h), dim elements a row.
    let element = |bytes: &[u8], dim: usize, s: usize, t: usize, h: usize, c: usize| {
        let sl = slot(s, t) as usize;
        let row = (sl / sz * hkv + h) * sz + sl % sz;
        let at = (row * dim / 32 + c / 32) * bb;
        block_element(name, &bytes[at..at + bb], c % 32)
    };
    let key = |s: usize, t: usize, h: usize, c: usize| element(&kb, d, s, t, h, c);
    let val = |s: usize, t: usize, h: usize, c: usize| element(&vb, dv, s, t, h, c);
    for s in 0..st.kv_len.len() {
        for t in 0..st.kv_len[s] as usize {
            for h in 0..hkv {
                for c0 in (0..d).step_by(32) {
                    let amax = (c0..c0 + 32)
                        .map(|c| st.raw(false, s, t, h, c).abs())
                        .fold(0.0, f64::max);
                    for c in c0..c0 + 32 {
                        let e = (key(s, t, h, c) - st.raw(false, s, t, h, c)).abs();
                        assert!(
                            e <= amax * step * 1.01,
                            "{} seq {} token {} k[{}]",
                            name,
                            s,
                            t,
                            c
                        );
                    }
                }
            }
        }
    }
    let ro = RefOpts {
        causal: true,
        ..Default::default()
    };
    let (want, _) = reference(
        &st.q,
        hq,
        hkv,
        d,
        dv,
        &key,
        &val,
        &st.q_start,
        &st.kv_len,
        None,
        &ro,
    );
    assert_close(&out, &want, TOL, name);
}

#[test]
fn paged_ggml_block_formats_match_the_decoded_bytes() {
    ggml_block_case("q8_0", BlockQ8_0::from_bytes_mut, 1.0 / 127.0, 41);
    ggml_block_case("q4_0", BlockQ4_0::from_bytes_mut, 1.0 / 7.0, 42);
    ggml_block_case("q4_1", BlockQ4_1::from_bytes_mut, 1.0 / 7.0, 43);
    ggml_block_case("q5_0", BlockQ5_0::from_bytes_mut, 1.0 / 15.0, 44);
    ggml_block_case("q5_1", BlockQ5_1::from_bytes_mut, 1.0 / 28.0, 45);
    ggml_block_case("iq4_nl", BlockIQ4NL::from_bytes_mut, 1.0 / 7.0, 46);
}

/// An int4 cache (I4x2 pages, odd D: rows padded to a byte) with K scales
/// `k_scale` (per token when None) and per-token V scales: the numbers the
/// write leaves, and attention against the reference over number * scale.
fn i4_case(seed: u64, d: usize, dv: usize, k_channel: Option<&[f32]>) {
    let (hq, hkv) = (4, 2);
    let st = Step::new(seed, hq, hkv, d, dv, &[9, 6, 1, 7], &[3, 1, 1, 7]);
    let (p, sz) = (11, 4);
    let (table, stride) = paging(seed, &st.kv_len, sz, p);
    let slot = |s: usize, t: usize| table[s * stride + t / sz] as i64 * sz as i64 + (t % sz) as i64;
    let (krow, vrow) = ((d + 1) / 2, (dv + 1) / 2);
    assert_eq!(I4x2::row_len(d).unwrap(), krow);
    let mut kp = vec![I4x2::default(); I4x2::pages_len(p, hkv, sz, d).unwrap()];
    let mut vp = vec![I4x2::default(); I4x2::pages_len(p, hkv, sz, dv).unwrap()];
    assert_eq!(kp.len(), p * hkv * sz * krow);
    let mut ks = vec![0.0f32; p * hkv * sz];
    let mut vs = vec![0.0f32; p * hkv * sz];
    let mut out = vec![0.0f32; st.t * hq * dv];
    {
        let k_scale = match k_channel {
            Some(c) => KvScale::PerChannel(c),
            None => KvScale::PerToken(&mut ks),
        };
        let mut cache = KvCache::new(&mut kp, &mut vp, p, hkv, sz, d, dv)
            .unwrap()
            .scales(k_scale, KvScale::PerToken(&mut vs))
            .unwrap()
            .block_table(&table, stride);
        st.write(&mut cache, &slot);
        let batch = KvBatch::new(&st.q_start, &st.kv_len).unwrap();
        kv_attention(
            &Tensor::new(&st.q, &[st.t, hq, d]).unwrap(),
            &cache,
            &batch,
            &mut TensorMut::new(&mut out, &[st.t, hq, dv]).unwrap(),
            &SdpaOptions::new()
                .scale(Some(0.4))
                .causal(Causal::BottomRight),
        )
        .unwrap();
    }
    // The number of element c of (s, t, h) (a row of `row` bytes) and its scale.
    let number = |pages: &[I4x2], row: usize, s: usize, t: usize, h: usize, c: usize| {
        let sl = slot(s, t) as usize;
        let byte = pages[((sl / sz * hkv + h) * sz + sl % sz) * row + c / 2];
        let x = if c % 2 == 0 { byte.0 & 15 } else { byte.0 >> 4 } as i32;
        (if x >= 8 { x - 16 } else { x }) as f64
    };
    let token = |s: usize, t: usize, h: usize| {
        let sl = slot(s, t) as usize;
        (sl / sz * hkv + h) * sz + sl % sz
    };
    let k_scale = |s: usize, t: usize, h: usize, c: usize| match k_channel {
        Some(ch) => ch[h * d + c] as f64,
        None => ks[token(s, t, h)] as f64,
    };
    for s in 0..st.kv_len.len() {
        for t in 0..st.kv_len[s] as usize {
            for h in 0..hkv {
                let amax = (0..dv)
                    .map(|c| st.raw(true, s, t, h, c).abs())
                    .fold(0.0, f64::max);
                assert_eq!(vs[token(s, t, h)], amax as f32 / 7.0, "v scale {} {}", s, t);
                for c in 0..d {
                    let x = st.raw(false, s, t, h, c) / k_scale(s, t, h, c);
                    let mut want = x.round();
                    if (x - x.trunc()).abs() == 0.5 {
                        want = 2.0 * (x / 2.0).round(); // ties to even
                    }
                    // f32 division in the library: allow the neighbour at a near-tie.
                    let got = number(&kp, krow, s, t, h, c);
                    assert!(
                        got == want.clamp(-8.0, 7.0) || ((x - x.trunc()).abs() - 0.5).abs() < 1e-5,
                        "k seq {} token {} head {} [{}]: {} for {}",
                        s,
                        t,
                        h,
                        c,
                        got,
                        x
                    );
                }
                if d % 2 == 1 {
                    let sl = slot(s, t) as usize;
                    let last = kp[((sl / sz * hkv + h) * sz + sl % sz) * krow + krow - 1];
                    assert_eq!(last.0 >> 4, 0, "the padding nibble");
                }
            }
        }
    }
    let key = |s: usize, t: usize, h: usize, c: usize| {
        number(&kp, krow, s, t, h, c) * k_scale(s, t, h, c)
    };
    let val = |s: usize, t: usize, h: usize, c: usize| {
        number(&vp, vrow, s, t, h, c) * vs[token(s, t, h)] as f64
    };
    let ro = RefOpts {
        scale: 0.4f32 as f64,
        causal: true,
        ..Default::default()
    };
    let (want, _) = reference(
        &st.q,
        hq,
        hkv,
        d,
        dv,
        &key,
        &val,
        &st.q_start,
        &st.kv_len,
        None,
        &ro,
    );
    assert_close(&out, &want, TOL, "int4 out");
}

#[test]
fn paged_i4_per_token_scales() {
    i4_case(51, 16, 12, None);
}

#[test]
fn paged_i4_per_channel_k_per_token_v_odd_dims() {
    // KIVI's layout; D = 17 and Dv = 9: each row's last high nibble is padding.
    let ch: Vec<f32> = (0..2 * 17).map(|i| 0.15 + 0.01 * i as f32).collect();
    i4_case(52, 17, 9, Some(&ch));
}

#[test]
fn packed_pages_need_their_sizes() {
    assert_eq!(I4x2::new(-8, 7), I4x2(0x78));
    assert_eq!((I4x2(0x9f).lo(), I4x2(0x9f).hi()), (-1, -7));
    assert_eq!(BlockQ8_0::pages_len(2, 2, 4, 64).unwrap(), 32);
    assert_eq!(BlockQ5_1::row_len(96).unwrap(), 3);
    assert_eq!(I4x2::pages_len(2, 2, 4, 17).unwrap(), 2 * 2 * 4 * 9);
    let e = BlockQ4_0::row_len(48).unwrap_err();
    assert!(
        e.message()
            .contains("a row of 48 elements is not whole BlockQ4_0 blocks of 32"),
        "{}",
        e
    );
    // A pool one block short of [2, 2, 4, 64]: the crate says so in blocks.
    let mut kb = vec![BlockQ8_0::default(); 31];
    let mut vb = vec![BlockQ8_0::default(); 16];
    let e = KvCache::new(&mut kb, &mut vb, 2, 2, 4, 64, 32).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(
        e.message().starts_with(
            "k: the slice has 31 BlockQ8_0 (32 elements, 34 bytes each) but shape [2, 2, 4, 64]"
        ),
        "{}",
        e
    );
    let mut kb = vec![BlockQ8_0::default(); 32];
    assert!(KvCache::new(&mut kb, &mut vb, 2, 2, 4, 64, 32).is_ok());
    // D not a multiple of 32.
    let e = KvCache::new(&mut kb, &mut vb, 2, 2, 4, 40, 32).unwrap_err();
    assert!(e.message().starts_with("k: a row of 40 elements"), "{}", e);
    // A byte buffer that is not whole blocks.
    let mut bytes = vec![0u8; 35];
    let e = BlockQ8_0::from_bytes_mut(&mut bytes).unwrap_err();
    assert!(
        e.message()
            .starts_with("35 bytes are not a whole number of BlockQ8_0 blocks"),
        "{}",
        e
    );
    assert_eq!(
        BlockQ8_0::from_bytes_mut(&mut bytes[..34]).unwrap().len(),
        1
    );
    assert_eq!(BlockQ8_0::as_bytes(&vb).len(), 16 * 34);
    // Strided block pages whose rows are not whole blocks: the library's message.
    let mut vb = vec![BlockQ8_0::default(); 64];
    let mut kb = vec![BlockQ8_0::default(); 64];
    let cache = KvCache::with_strides(
        &mut kb,
        &[2, 2, 4, 32],
        &[256, 128, 40, 1],
        &mut vb,
        &[2, 2, 4, 32],
        &[256, 128, 32, 1],
    )
    .unwrap();
    let q = vec![0.0f32; 4 * 32];
    let mut out = vec![0.0f32; 4 * 32];
    let e = kv_attention(
        &Tensor::new(&q, &[1, 4, 32]).unwrap(),
        &cache,
        &KvBatch::new(&[0, 1], &[1]).unwrap(),
        &mut TensorMut::new(&mut out, &[1, 4, 32]).unwrap(),
        &SdpaOptions::new(),
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("32"), "{}", e);
    // An int4 pool one byte short.
    let mut k4 = vec![I4x2::default(); 2 * 2 * 4 * 9 - 1];
    let mut v4 = vec![I4x2::default(); 2 * 2 * 4 * 9];
    let e = KvCache::new(&mut k4, &mut v4, 2, 2, 4, 17, 17).unwrap_err();
    assert!(
        e.message()
            .starts_with("k: the slice has 143 I4x2 (2 elements, 1 bytes each)"),
        "{}",
        e
    );
}

/// kv_attention of `st` (scale 0.2, bottom-right causal) at `precision`:
/// (out [T, Hq, Dv], lse [T, Hq]).
fn run_at<T: CacheElement>(
    st: &Step,
    q: &[f32],
    hq: usize,
    cache: &KvCache<'_, T>,
    precision: Precision,
) -> (Vec<f32>, Vec<f32>) {
    let mut out = vec![f32::NAN; st.t * hq * st.dv];
    let mut lse = vec![f32::NAN; st.t * hq];
    let opts = SdpaOptions::new()
        .scale(Some(0.2))
        .causal(Causal::BottomRight)
        .precision(precision)
        .lse(TensorMut::new(&mut lse, &[st.t, hq]).unwrap());
    kv_attention(
        &Tensor::new(q, &[st.t, hq, st.d]).unwrap(),
        cache,
        &KvBatch::new(&st.q_start, &st.kv_len).unwrap(),
        &mut TensorMut::new(&mut out, &[st.t, hq, st.dv]).unwrap(),
        &opts,
    )
    .unwrap();
    drop(opts);
    (out, lse)
}

/// Precision::Int8 (`HWYATTN_PRECISION_INT8`) on an i8 cache with per-channel
/// K scales s_d (D = 40: a second block of 8 dims, zero-padded) and per-token
/// V scales, in a batch of two decodes (2 query rows per kv head: the integer
/// dot products) and a prefill of 7 (14 rows: fp32 tiles on the quantized
/// query). Against F32 products, out moves (the query is quantized) by at
/// most what include/hwyattn.h's accuracy statement allows: each score by
///   E = scale * sum over blocks of (max|x| over the block / 254) * sum |k'|
/// over the block (x_d = q_d s_d, k' = the key / s_d: the i8 number), so
/// lse by at most E_row (the row's largest E) and each weight by a factor
/// within exp(+-2 E_row): out by at most max|v| (exp(2 E_row) - 1). And
/// Int8 is F32 on the query quantized and dequantized by hand (d q_d / s_d),
/// within fp32 rounding.
#[test]
fn int8_precision_on_an_i8_cache_with_channel_scales() {
    let (hq, hkv, d, dv) = (4, 2, 40, 24);
    let st = Step::new(61, hq, hkv, d, dv, &[9, 6, 7], &[1, 1, 7]);
    let (p, sz) = (8, 4);
    let (table, stride) = paging(62, &st.kv_len, sz, p);
    let slot = |s: usize, t: usize| table[s * stride + t / sz] as i64 * sz as i64 + (t % sz) as i64;
    let ch: Vec<f32> = (0..hkv * d).map(|i| 0.012 + 0.0003 * i as f32).collect();
    let mut kp = vec![0i8; p * hkv * sz * d];
    let mut vp = vec![0i8; p * hkv * sz * dv];
    let mut vs = vec![0.0f32; p * hkv * sz];
    // The query as INT8 sees it: x = q s_d per block of 32, d = max|x| / 127,
    // round(x / d) half away from zero (f32::round), back to d q / s_d.
    let mut qd = vec![0.0f32; st.q.len()];
    for row in 0..st.t * hq {
        let hk = row % hq / (hq / hkv);
        for c0 in (0..d).step_by(32) {
            let c1 = (c0 + 32).min(d);
            let x = |c: usize| st.q[row * d + c] * ch[hk * d + c];
            let amax = (c0..c1).map(|c| x(c).abs()).fold(0.0f32, f32::max);
            let step = amax / 127.0;
            let inv = if step != 0.0 { 1.0 / step } else { 0.0 };
            for c in c0..c1 {
                qd[row * d + c] = step * (x(c) * inv).round() / ch[hk * d + c];
            }
        }
    }
    let ((out32, lse32), (out8, lse8), (outq, _)) = {
        let mut cache = KvCache::new(&mut kp, &mut vp, p, hkv, sz, d, dv)
            .unwrap()
            .scales(KvScale::PerChannel(&ch), KvScale::PerToken(&mut vs))
            .unwrap()
            .block_table(&table, stride);
        st.write(&mut cache, &slot);
        (
            run_at(&st, &st.q, hq, &cache, Precision::F32),
            run_at(&st, &st.q, hq, &cache, Precision::Int8),
            run_at(&st, &qd, hq, &cache, Precision::F32),
        )
    };
    assert!(out8.iter().chain(&lse8).all(|x| x.is_finite()));
    assert_ne!(
        out8, out32,
        "Int8 gave F32's bits: the query was not quantized"
    );
    let token = |s: usize, t: usize, h: usize| {
        let sl = slot(s, t) as usize;
        (sl / sz * hkv + h) * sz + sl % sz
    };
    let vmax = (0..p * hkv * sz * dv)
        .map(|i| (vp[i] as f64 * vs[i / dv] as f64).abs())
        .fold(0.0, f64::max);
    let mut max_diff = 0.0f64;
    for s in 0..st.kv_len.len() {
        let q0 = st.q_start[s] as usize;
        for i in 0..(st.q_start[s + 1] as usize - q0) {
            for h in 0..hq {
                let hk = h / (hq / hkv);
                let row = (q0 + i) * hq + h;
                let mut e_row = 0.0f64;
                for t in 0..st.kv_len[s] as usize {
                    let mut e = 0.0;
                    for c0 in (0..d).step_by(32) {
                        let c1 = (c0 + 32).min(d);
                        let amax = (c0..c1)
                            .map(|c| (st.q[row * d + c] as f64 * ch[hk * d + c] as f64).abs())
                            .fold(0.0, f64::max);
                        let ksum: f64 = (c0..c1)
                            .map(|c| (kp[token(s, t, hk) * d + c] as f64).abs())
                            .sum();
                        e += amax / 254.0 * ksum;
                    }
                    e_row = e_row.max(0.2f32 as f64 * e);
                }
                let bound = vmax * (2.0 * e_row).exp_m1() + 1e-5;
                for c in 0..dv {
                    let diff = (out8[row * dv + c] as f64 - out32[row * dv + c] as f64).abs();
                    max_diff = max_diff.max(diff);
                    assert!(
                        diff <= bound,
                        "seq {} query {} head {} out[{}]: moved {} > {}",
                        s,
                        i,
                        h,
                        c,
                        diff,
                        bound
                    );
                }
                let dl = (lse8[row] as f64 - lse32[row] as f64).abs();
                assert!(
                    dl <= e_row + 1e-5,
                    "seq {} query {} head {} lse moved {}",
                    s,
                    i,
                    h,
                    dl
                );
            }
        }
    }
    assert!(max_diff > 0.0);
    let want: Vec<f64> = outq.iter().map(|&x| x as f64).collect();
    assert_close(&out8, &want, TOL, "Int8 against F32 on the quantized query");
}

/// On a float K, Int8 is F32: the same bits of out and lse (f32 and Bf16
/// pages, the same mixed batch).
#[test]
fn int8_precision_on_a_float_cache_is_f32() {
    let (hq, hkv, d, dv) = (4, 2, 40, 24);
    let st = Step::new(63, hq, hkv, d, dv, &[9, 6, 7], &[1, 1, 7]);
    let (p, sz) = (8, 4);
    let (table, stride) = paging(64, &st.kv_len, sz, p);
    let slot = |s: usize, t: usize| table[s * stride + t / sz] as i64 * sz as i64 + (t % sz) as i64;
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    let mut kp = vec![0.0f32; p * hkv * sz * d];
    let mut vp = vec![0.0f32; p * hkv * sz * dv];
    let mut cache = KvCache::new(&mut kp, &mut vp, p, hkv, sz, d, dv)
        .unwrap()
        .block_table(&table, stride);
    st.write(&mut cache, &slot);
    let (out32, lse32) = run_at(&st, &st.q, hq, &cache, Precision::F32);
    let (out8, lse8) = run_at(&st, &st.q, hq, &cache, Precision::Int8);
    assert!(out32.iter().all(|x| x.is_finite()));
    assert_eq!(bits(&out8), bits(&out32), "out");
    assert_eq!(bits(&lse8), bits(&lse32), "lse");
    let mut kb = vec![Bf16::default(); p * hkv * sz * d];
    let mut vb = vec![Bf16::default(); p * hkv * sz * dv];
    let mut cache = KvCache::new(&mut kb, &mut vb, p, hkv, sz, d, dv)
        .unwrap()
        .block_table(&table, stride);
    st.write(&mut cache, &slot);
    let (out32, lse32) = run_at(&st, &st.q, hq, &cache, Precision::F32);
    let (out8, lse8) = run_at(&st, &st.q, hq, &cache, Precision::Int8);
    assert_eq!(bits(&out8), bits(&out32), "out, bf16 pages");
    assert_eq!(bits(&lse8), bits(&lse32), "lse, bf16 pages");
}
