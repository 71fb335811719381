// SPDX-License-Identifier: Apache-2.0
//
// Causal grouped-query attention on a small problem, then what an error
// looks like. Run from rust/ (see README.md for linking):
//   HWYATTN_LIB_DIR=../build LD_LIBRARY_PATH=../build cargo run --example sdpa

use hwyattn::{sdpa, Causal, SdpaOptions, Tensor, TensorMut};

fn main() -> Result<(), hwyattn::Error> {
    // q [B=1, Hq=4, Lq=3, D=8]; k, v [1, Hkv=2, Lk=3, 8]: two query heads per K/V head.
    let (b, hq, hkv, l, d) = (1, 4, 2, 3, 8);
    let q: Vec<f32> = (0..b * hq * l * d)
        .map(|i| ((i % 7) as f32 - 3.0) * 0.1)
        .collect();
    let k: Vec<f32> = (0..b * hkv * l * d)
        .map(|i| ((i % 5) as f32 - 2.0) * 0.2)
        .collect();
    let v: Vec<f32> = (0..b * hkv * l * d).map(|i| (i / d) as f32).collect();
    let mut out = vec![0.0f32; b * hq * l * d];

    let q_view = Tensor::new(&q, &[b, hq, l, d])?;
    let k_view = Tensor::new(&k, &[b, hkv, l, d])?;
    let v_view = Tensor::new(&v, &[b, hkv, l, d])?;
    let mut lse = vec![0.0f32; b * hq * l];
    // The options borrow lse (mutably) for as long as they are used.
    let opts = SdpaOptions::new() // scale: None = 1/sqrt(8)
        .causal(Causal::TopLeft)
        .lse(TensorMut::new(&mut lse, &[b, hq, l])?);
    sdpa(
        &q_view,
        &k_view,
        &v_view,
        &mut TensorMut::new(&mut out, &[b, hq, l, d])?,
        &opts,
    )?;

    println!(
        "hwyattn {} on {}",
        hwyattn::version(),
        hwyattn::simd_target()
    );
    for row in 0..l {
        // v's rows hold their key index, so head 0's output is the mean key
        // index under the attention weights: row 0 sees only key 0.
        println!(
            "head 0, query {}: out[0] = {:.4}, lse = {:.4}",
            row,
            out[row * d],
            lse[row]
        );
    }

    // An explicit zero scale is an error, not the C ABI's default.
    let err = sdpa(
        &q_view,
        &k_view,
        &v_view,
        &mut TensorMut::new(&mut out, &[b, hq, l, d])?,
        &SdpaOptions::new().scale(Some(0.0)),
    )
    .unwrap_err();
    println!("scale = Some(0.0): {}", err);
    Ok(())
}
