//! The BERT encoder of a sentence-transformers model (all-MiniLM-L6-v2 and its kind), written
//! here rather than taken from an inference framework: its linear maps stream their weights
//! (linear.rs), and the build no longer compiles a framework's every model family
//! (docs/design/local-embeddings.md has both measurements).
//!
//! The texts of a batch are laid end to end, no padding: the linear maps, layer norms and GELU
//! treat every token alike, and attention runs within each text's own tokens. That is what
//! padding plus an attention mask computes, without the padding's work.

use super::linear::Linear;
use pulp::Arch;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

/// The fields of the model's `config.json` the encoder reads.
#[derive(Debug, Deserialize)]
pub(super) struct Config {
    hidden_size: usize,
    intermediate_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    layer_norm_eps: f32,
    max_position_embeddings: usize,
    type_vocab_size: usize,
    vocab_size: usize,
    hidden_act: String,
    #[serde(default = "absolute")]
    position_embedding_type: String,
}

fn absolute() -> String {
    "absolute".into()
}

/// One text's word pieces, as the tokenizer gives them.
pub(super) struct Pieces<'a> {
    pub ids: &'a [u32],
    pub type_ids: &'a [u32],
}

pub(super) struct Bert {
    arch: Arch,
    hidden: usize,
    heads: usize,
    vocab: usize,
    type_vocab: usize,
    max_positions: usize,
    word_embeddings: Vec<f32>,
    position_embeddings: Vec<f32>,
    token_type_embeddings: Vec<f32>,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
}

struct Layer {
    /// Query, key and value in one map (their weight rows stacked): one pass over the tokens.
    query_key_value: Linear,
    attention_output: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

struct LayerNorm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

/// The tensors of a `model.safetensors`, by their name in the sentence-transformers export
/// (a Hugging Face BertModel's names prefixed `bert.` are accepted too).
struct Tensors<'a>(SafeTensors<'a>);

impl Tensors<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let view = self
            .0
            .tensor(name)
            .or_else(|_| self.0.tensor(&format!("bert.{name}")))
            .map_err(|_| format!("no tensor {name}"))?;
        if view.dtype() != Dtype::F32 || view.shape() != shape {
            return Err(format!(
                "tensor {name} is {:?} {:?}, expected F32 {shape:?}",
                view.dtype(),
                view.shape()
            ));
        }
        Ok(view
            .data()
            .chunks_exact(4)
            .map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
            .collect())
    }

    fn linear(&self, name: &str, outputs: usize, inputs: usize) -> Result<Linear, String> {
        Ok(Linear::new(
            self.get(&format!("{name}.weight"), &[outputs, inputs])?,
            self.get(&format!("{name}.bias"), &[outputs])?,
        ))
    }

    fn layer_norm(&self, name: &str, size: usize, eps: f32) -> Result<LayerNorm, String> {
        Ok(LayerNorm {
            weight: self.get(&format!("{name}.weight"), &[size])?,
            bias: self.get(&format!("{name}.bias"), &[size])?,
            eps,
        })
    }
}

impl Bert {
    /// Builds the encoder from `config.json`'s fields and the bytes of `model.safetensors`.
    pub(super) fn load(config: &Config, safetensors: &[u8]) -> Result<Bert, String> {
        if config.hidden_act != "gelu" || config.position_embedding_type != "absolute" {
            return Err(format!(
                "unsupported model: hidden_act {:?}, position_embedding_type {:?} (gelu and absolute are)",
                config.hidden_act, config.position_embedding_type
            ));
        }
        if config.num_attention_heads == 0 || !config.hidden_size.is_multiple_of(config.num_attention_heads) {
            return Err("hidden_size is not a multiple of num_attention_heads".into());
        }
        let tensors = Tensors(SafeTensors::deserialize(safetensors).map_err(|e| e.to_string())?);
        let (hidden, inner, eps) = (config.hidden_size, config.intermediate_size, config.layer_norm_eps);
        let layers = (0..config.num_hidden_layers)
            .map(|layer| {
                let name = |part: &str| format!("encoder.layer.{layer}.{part}");
                let mut weight = Vec::with_capacity(3 * hidden * hidden);
                let mut bias = Vec::with_capacity(3 * hidden);
                for part in ["query", "key", "value"] {
                    weight.extend(tensors.get(&name(&format!("attention.self.{part}.weight")), &[hidden, hidden])?);
                    bias.extend(tensors.get(&name(&format!("attention.self.{part}.bias")), &[hidden])?);
                }
                Ok(Layer {
                    query_key_value: Linear::new(weight, bias),
                    attention_output: tensors.linear(&name("attention.output.dense"), hidden, hidden)?,
                    attention_norm: tensors.layer_norm(&name("attention.output.LayerNorm"), hidden, eps)?,
                    intermediate: tensors.linear(&name("intermediate.dense"), inner, hidden)?,
                    output: tensors.linear(&name("output.dense"), hidden, inner)?,
                    output_norm: tensors.layer_norm(&name("output.LayerNorm"), hidden, eps)?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Bert {
            arch: Arch::new(),
            hidden,
            heads: config.num_attention_heads,
            vocab: config.vocab_size,
            type_vocab: config.type_vocab_size,
            max_positions: config.max_position_embeddings,
            word_embeddings: tensors.get("embeddings.word_embeddings.weight", &[config.vocab_size, hidden])?,
            position_embeddings: tensors.get(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, hidden],
            )?,
            token_type_embeddings: tensors.get(
                "embeddings.token_type_embeddings.weight",
                &[config.type_vocab_size, hidden],
            )?,
            embeddings_norm: tensors.layer_norm("embeddings.LayerNorm", hidden, eps)?,
            layers,
        })
    }

    /// Each text's sentence embedding: the mean of its last hidden states, L2-normalised.
    pub(super) fn embed(&self, texts: &[Pieces<'_>]) -> Result<Vec<Vec<f32>>, String> {
        let lengths: Vec<usize> = texts.iter().map(|text| text.ids.len()).collect();
        let mut x = self.embeddings(texts)?;
        for layer in &self.layers {
            x = self.layer(layer, x, &lengths);
        }
        let mut start = 0;
        Ok(lengths
            .iter()
            .map(|&length| {
                let mut mean = vec![0.0f32; self.hidden];
                for token in x[start * self.hidden..(start + length) * self.hidden].chunks_exact(self.hidden) {
                    mean.iter_mut().zip(token).for_each(|(sum, value)| *sum += value);
                }
                start += length;
                let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
                // An empty text (no pieces at all) has no direction: left as zeros.
                let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
                mean.iter_mut().for_each(|v| *v *= scale);
                mean
            })
            .collect())
    }

    /// Word + position + token type embeddings, layer-normalised: (tokens, hidden).
    fn embeddings(&self, texts: &[Pieces<'_>]) -> Result<Vec<f32>, String> {
        let hidden = self.hidden;
        let mut x = Vec::with_capacity(texts.iter().map(|t| t.ids.len()).sum::<usize>() * hidden);
        for text in texts {
            if text.ids.len() > self.max_positions {
                return Err(format!(
                    "{} pieces, more than the model's {}",
                    text.ids.len(),
                    self.max_positions
                ));
            }
            for (position, (&id, &type_id)) in text.ids.iter().zip(text.type_ids).enumerate() {
                let (id, type_id) = (id as usize, type_id as usize);
                if id >= self.vocab || type_id >= self.type_vocab {
                    return Err(format!("piece {id} (type {type_id}) outside the model's vocabulary"));
                }
                let word = &self.word_embeddings[id * hidden..][..hidden];
                let place = &self.position_embeddings[position * hidden..][..hidden];
                let kind = &self.token_type_embeddings[type_id * hidden..][..hidden];
                x.extend((0..hidden).map(|i| word[i] + place[i] + kind[i]));
            }
        }
        for token in x.chunks_exact_mut(hidden) {
            self.embeddings_norm.apply(token);
        }
        Ok(x)
    }

    fn layer(&self, layer: &Layer, mut x: Vec<f32>, lengths: &[usize]) -> Vec<f32> {
        let query_key_value = layer.query_key_value.forward(self.arch, &x);
        let context = self.attention(&query_key_value, lengths);
        let attended = layer.attention_output.forward(self.arch, &context);
        add_and_norm(&mut x, &attended, &layer.attention_norm);
        let mut inner = layer.intermediate.forward(self.arch, &x);
        inner.iter_mut().for_each(|v| *v = gelu(*v));
        let output = layer.output.forward(self.arch, &inner);
        add_and_norm(&mut x, &output, &layer.output_norm);
        x
    }

    /// Scaled dot-product self-attention within each text, every head: (tokens, hidden).
    fn attention(&self, query_key_value: &[f32], lengths: &[usize]) -> Vec<f32> {
        let hidden = self.hidden;
        let head_size = hidden / self.heads;
        let scale = 1.0 / (head_size as f32).sqrt();
        // A token's row holds its query, key and value side by side.
        let part = |token: usize, which: usize, head: usize| -> &[f32] {
            let start = token * 3 * hidden + which * hidden + head * head_size;
            &query_key_value[start..start + head_size]
        };
        let mut context = vec![0.0f32; query_key_value.len() / 3];
        let mut scores = Vec::new();
        let mut start = 0;
        for &length in lengths {
            let tokens = start..start + length;
            for head in 0..self.heads {
                for query in tokens.clone() {
                    let q = part(query, 0, head);
                    scores.clear();
                    scores.extend(tokens.clone().map(|key| dot(q, part(key, 1, head)) * scale));
                    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    scores.iter_mut().for_each(|s| *s = (*s - max).exp());
                    let total: f32 = scores.iter().sum();
                    let out = &mut context[query * hidden + head * head_size..][..head_size];
                    for (key, weight) in tokens.clone().zip(&scores) {
                        let weight = weight / total;
                        out.iter_mut()
                            .zip(part(key, 2, head))
                            .for_each(|(o, v)| *o += weight * v);
                    }
                }
            }
            start += length;
        }
        context
    }
}

impl LayerNorm {
    fn apply(&self, x: &mut [f32]) {
        let n = x.len() as f32;
        let mean = x.iter().sum::<f32>() / n;
        let variance = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
        let scale = 1.0 / (variance + self.eps).sqrt();
        for ((v, weight), bias) in x.iter_mut().zip(&self.weight).zip(&self.bias) {
            *v = (*v - mean) * scale * weight + bias;
        }
    }
}

/// `x = norm(x + y)`, token by token: a residual connection and its layer norm.
fn add_and_norm(x: &mut [f32], y: &[f32], norm: &LayerNorm) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
    for token in x.chunks_exact_mut(norm.weight.len()) {
        norm.apply(token);
    }
}

/// BERT's GELU, the exact one (with erf), as the model was trained with.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf in f32 as a ratio of two polynomials (Eigen's and XLA's fast erf), within a few units in
/// the last place of the exact one: branch-free, so the compiler vectorises the GELU of a layer,
/// where calling libm's erf for each of its 1,536 × tokens values was a tenth of a query's time.
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let p = [
        -2.726_142_3e-10,
        2.770_681_4e-8,
        -2.101_024e-6,
        -5.692_506_4e-5,
        -7.349_906_3e-4,
        -2.954_6e-3,
        -1.609_603_3e-2,
    ]
    .iter()
    .fold(0.0, |sum, c| sum * x2 + c);
    let q = [
        -1.456_607_2e-5,
        -2.133_740_6e-4,
        -1.682_827e-3,
        -7.373_329e-3,
        -1.426_474e-2,
    ]
    .iter()
    .fold(0.0, |sum, c| sum * x2 + c);
    x * p / q
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    /// The fast erf against libm's over the range GELU sees (and beyond, where it saturates).
    #[test]
    fn erf_is_within_a_millionth_of_libm() {
        for i in -6000..=6000 {
            let x = i as f32 / 1000.0;
            let (fast, exact) = (super::erf(x), libm::erff(x));
            assert!((fast - exact).abs() < 1e-6, "erf({x}) = {fast}, libm {exact}");
        }
    }
}
