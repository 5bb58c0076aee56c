//! The encoder's linear maps, each computed as `(W · xᵀ)ᵀ`: every weight row is read once per
//! call as one sequential stream, never copied into a packed layout. For one query of a dozen
//! word pieces the cost of a BERT forward is reading its 42 MB of weights, so the layout that
//! streams them is the one that pays (docs/design/local-embeddings.md, "A search within 10 ms").
//!
//! The weights are kept in bfloat16 (the top half of each f32: 21 MB instead of 42) and widened
//! to f32 a row pair at a time, so a question reads half the memory; the vectors stay within
//! cosine 0.99999 of the f32 model's (docs/design/local-embeddings.md). The multiply-adds, in f32,
//! use the CPU's widest vectors (AVX2 and FMA where present), chosen at run time by `pulp`, which
//! needs no `unsafe` here.

use pulp::{Arch, Simd, WithSimd};

/// Tokens whose inputs are kept close (in the L2 cache) while every weight row passes over them:
/// a batch of many texts then reads the weights once per block instead of once per token.
const TOKEN_BLOCK: usize = 64;

/// A linear map `y = x · Wᵀ + b` with PyTorch's layout: `weight` is (outputs, inputs) row-major,
/// in bfloat16.
pub(super) struct Linear {
    weight: Vec<u16>,
    bias: Vec<f32>,
    inputs: usize,
}

impl Linear {
    pub(super) fn new(weight: Vec<f32>, bias: Vec<f32>) -> Linear {
        let inputs = weight.len() / bias.len();
        assert_eq!(weight.len(), inputs * bias.len(), "weight rows of unequal length");
        Linear {
            weight: weight.into_iter().map(to_bfloat16).collect(),
            bias,
            inputs,
        }
    }

    pub(super) fn outputs(&self) -> usize {
        self.bias.len()
    }

    /// `x` is (tokens, inputs) row-major; returns (tokens, outputs) row-major.
    pub(super) fn forward(&self, arch: Arch, x: &[f32]) -> Vec<f32> {
        let tokens = x.len() / self.inputs;
        let outputs = self.outputs();
        // W · xᵀ: (outputs, tokens), so each output row is one weight row against every token.
        let mut transposed = vec![0.0; outputs * tokens];
        // One thread: the weight rows split over two cores (a thread per product, each streaming
        // half the weights) cost 3-4 ms more CPU per query and gained no wall time on this 2-core
        // machine shared with other work (docs/design/local-embeddings.md).
        arch.dispatch(RowsTimesTokens {
            weight: &self.weight,
            x,
            inputs: self.inputs,
            out: &mut transposed,
        });
        let mut y = vec![0.0; tokens * outputs];
        for (output, (row, bias)) in transposed.chunks_exact(tokens.max(1)).zip(&self.bias).enumerate() {
            for (token, value) in row.iter().enumerate() {
                y[token * outputs + output] = value + bias;
            }
        }
        y
    }
}

/// The bfloat16 nearest `value` (ties to even): the upper 16 bits of its f32, rounded.
fn to_bfloat16(value: f32) -> u16 {
    let bits = value.to_bits();
    (bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

fn from_bfloat16(value: u16) -> f32 {
    f32::from_bits(u32::from(value) << 16)
}

/// `out[r * tokens + t] = weight row r · token t`, for a run of weight rows.
struct RowsTimesTokens<'a> {
    weight: &'a [u16],
    x: &'a [f32],
    inputs: usize,
    out: &'a mut [f32],
}

impl WithSimd for RowsTimesTokens<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let RowsTimesTokens { weight, x, inputs, out } = self;
        let tokens = x.len() / inputs;
        let rows = weight.len() / inputs;
        // The current rows widened to f32 (a few KB: they stay in L1 while every token passes).
        let mut widened = vec![0.0; 2 * inputs];
        for block in (0..tokens).step_by(TOKEN_BLOCK) {
            let block_end = (block + TOKEN_BLOCK).min(tokens);
            let mut row = 0;
            while row < rows {
                // Two weight rows at a time: each input vector loaded serves two multiply-adds.
                if row + 1 < rows {
                    widen(&weight[row * inputs..(row + 2) * inputs], &mut widened);
                    let (first, second) = widened.split_at(inputs);
                    let pair = [first, second];
                    tokens_against(simd, pair, x, inputs, block, block_end, |r, t, value| {
                        out[(row + r) * tokens + t] = value;
                    });
                    row += 2;
                } else {
                    widen(&weight[row * inputs..(row + 1) * inputs], &mut widened);
                    let single = [&widened[..inputs]];
                    tokens_against(simd, single, x, inputs, block, block_end, |_, t, value| {
                        out[row * tokens + t] = value;
                    });
                    row += 1;
                }
            }
        }
    }
}

/// Inlined into the dispatched kernel, so the compiler widens in vectors of the CPU's width.
#[inline(always)]
fn widen(rows: &[u16], into: &mut [f32]) {
    for (wide, narrow) in into.iter_mut().zip(rows) {
        *wide = from_bfloat16(*narrow);
    }
}

/// The dot products of `R` weight rows with tokens `from..to`, four tokens at a time (eight
/// accumulators and six loads per step fill the 16 vector registers without spilling).
#[inline(always)]
fn tokens_against<S: Simd, const R: usize>(
    simd: S,
    rows: [&[f32]; R],
    x: &[f32],
    inputs: usize,
    from: usize,
    to: usize,
    mut store: impl FnMut(usize, usize, f32),
) {
    let token = |t: usize| &x[t * inputs..(t + 1) * inputs];
    let mut t = from;
    while t < to {
        match to - t {
            1 => store_tile(tile(simd, rows, [token(t)]), t, &mut store),
            2 => store_tile(tile(simd, rows, [token(t), token(t + 1)]), t, &mut store),
            3 => store_tile(tile(simd, rows, [token(t), token(t + 1), token(t + 2)]), t, &mut store),
            _ => store_tile(
                tile(simd, rows, [token(t), token(t + 1), token(t + 2), token(t + 3)]),
                t,
                &mut store,
            ),
        }
        t += 4;
    }
}

#[inline(always)]
fn store_tile<const R: usize, const T: usize>(
    tile: [[f32; T]; R],
    first_token: usize,
    store: &mut impl FnMut(usize, usize, f32),
) {
    for (r, values) in tile.iter().enumerate() {
        for (t, value) in values.iter().enumerate() {
            store(r, first_token + t, *value);
        }
    }
}

/// `R × T` dot products of equal-length rows, in vectors of the CPU's width.
#[inline(always)]
fn tile<S: Simd, const R: usize, const T: usize>(simd: S, rows: [&[f32]; R], tokens: [&[f32]; T]) -> [[f32; T]; R] {
    let rows = rows.map(S::as_simd_f32s);
    let tokens = tokens.map(S::as_simd_f32s);
    let steps = rows[0].0.len();
    // Plain loops over the constant R and T (no closures in the hot loop), so the compiler unrolls
    // them and keeps the accumulators in registers.
    let mut sums = [[simd.splat_f32s(0.0); T]; R];
    for step in 0..steps {
        let mut inputs = [simd.splat_f32s(0.0); T];
        for t in 0..T {
            inputs[t] = tokens[t].0[step];
        }
        for r in 0..R {
            let weight = rows[r].0[step];
            for t in 0..T {
                sums[r][t] = simd.mul_add_f32s(weight, inputs[t], sums[r][t]);
            }
        }
    }
    let mut dots = [[0.0; T]; R];
    for r in 0..R {
        for t in 0..T {
            let tail: f32 = rows[r].1.iter().zip(tokens[t].1).map(|(w, x)| w * x).sum();
            dots[r][t] = simd.reduce_sum_f32s(sums[r][t]) + tail;
        }
    }
    dots
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the plain definition with the weights as stored (bfloat16), on sizes that leave every remainder (rows, tokens, inputs
    /// not a multiple of the vector width) and a batch longer than one token block.
    #[test]
    fn the_product_is_x_times_w_transposed_plus_bias() {
        let arch = Arch::new();
        for (outputs, inputs, tokens) in [(5, 13, 7), (3, 8, 1), (1536, 384, 3), (384, 1536, 70)] {
            let weight: Vec<f32> = (0..outputs * inputs)
                .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
                .collect();
            let bias: Vec<f32> = (0..outputs).map(|i| i as f32 / 10.0).collect();
            let x: Vec<f32> = (0..tokens * inputs)
                .map(|i| ((i * 104729) % 97) as f32 / 48.0 - 1.0)
                .collect();
            let linear = Linear::new(weight.clone(), bias.clone());
            let y = linear.forward(arch, &x);
            assert_eq!(y.len(), tokens * outputs);
            for t in 0..tokens {
                for o in 0..outputs {
                    let want: f32 = (0..inputs)
                        .map(|i| x[t * inputs + i] * from_bfloat16(to_bfloat16(weight[o * inputs + i])))
                        .sum::<f32>()
                        + bias[o];
                    let got = y[t * outputs + o];
                    assert!(
                        (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                        "({outputs}, {inputs}, {tokens}) y[{t}][{o}] = {got}, want {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn bfloat16_is_the_nearest_ties_to_even() {
        assert_eq!(from_bfloat16(to_bfloat16(1.0)), 1.0);
        assert_eq!(from_bfloat16(to_bfloat16(-0.375)), -0.375);
        // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the tie goes to the even one, 1.
        assert_eq!(from_bfloat16(to_bfloat16(1.0 + 1.0 / 256.0)), 1.0);
        assert_eq!(from_bfloat16(to_bfloat16(1.0 + 3.0 / 512.0)), 1.0 + 1.0 / 128.0);
    }
}
