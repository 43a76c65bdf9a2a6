//! The decoder shared by Llama (SmolLM2) and Qwen2, with role conditioning built in.
//!
//! The two architectures differ only in q/k/v biases (Qwen2 has them), in the rotary
//! layout (GGUF Llama files store q/k permuted for interleaved RoPE) and in whether the
//! output matrix is tied; one implementation keeps the role adapters in one place.
//!
//! Every forward runs in one of two modes. [`Mode::Fast`] uses candle's fused kernels
//! (`rms_norm`, `softmax_last_dim`, `rope`), which have no backward; it serves generation.
//! [`Mode::Diff`] uses only ops with a backward (candle-nn's fused ops silently drop
//! gradients, DESIGN.md), and serves training.

use std::sync::Arc;

use candle_core::{quantized::QMatMul, DType, Device, Tensor, D};
use onebrain_kernels::{CausalAttention, DecodeAttention, SwiGlu};
use serde::{Deserialize, Serialize};

pub(crate) use crate::kv_cache::{KvCache, LayerKv};

mod linear;
pub use linear::LORA_TARGETS;
pub(crate) use linear::{Linear, LoraPair, RoleView, Weight};
use crate::{Error, Result};

/// Which family a checkpoint belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Llama (SmolLM2 is one): no attention biases.
    Llama,
    /// Qwen2 / Qwen2.5: biases on q, k and v.
    Qwen2,
}

/// Shape and numerics of a backbone, with Hugging Face `config.json` field names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchConfig {
    /// Architecture family.
    pub arch: Arch,
    /// Vocabulary size (rows of the embedding).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the MLP.
    pub intermediate_size: usize,
    /// Number of decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (grouped-query attention).
    pub num_key_value_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// RoPE base frequency.
    pub rope_theta: f64,
    /// Context length the model was trained for.
    pub max_position_embeddings: usize,
    /// Whether q/k rows are stored for interleaved (GPT-J style) RoPE, as in GGUF Llama
    /// files; Hugging Face checkpoints and Qwen2 use the rotate-half layout.
    pub rope_interleaved: bool,
}

impl ArchConfig {
    /// `Ok` for a shape a forward can run: heads that divide, a head width RoPE can rotate,
    /// no empty dimension, finite positive numerics. Both loaders (GGUF metadata, a Hugging
    /// Face `config.json`) check what they read with it.
    pub(crate) fn validate(&self) -> Result<()> {
        let cfg = self;
        let bad = |what: &str| Err(Error::meta("architecture", what.to_string()));
        if cfg.num_attention_heads == 0 || cfg.num_key_value_heads == 0 || cfg.head_dim == 0 {
            return bad("zero heads or head width");
        }
        if cfg.num_attention_heads % cfg.num_key_value_heads != 0 {
            return bad("query heads are not a multiple of key/value heads");
        }
        if cfg.head_dim % 2 != 0 {
            return bad("odd head width cannot be rotated");
        }
        if cfg.num_hidden_layers == 0 || cfg.hidden_size == 0 || cfg.vocab_size == 0 || cfg.intermediate_size == 0 {
            return bad("empty model");
        }
        if cfg.max_position_embeddings == 0 {
            return bad("a context of no positions");
        }
        // Rotary tables and every RMSNorm divide by these: a NaN here is a NaN in every output.
        if !(cfg.rope_theta.is_finite() && cfg.rope_theta > 0.0) {
            return bad("RoPE base frequency not a positive number");
        }
        if !(cfg.rms_norm_eps.is_finite() && cfg.rms_norm_eps >= 0.0) {
            return bad("RMSNorm epsilon not a finite number of at least 0");
        }
        Ok(())
    }
}

/// Which kernels a forward may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Fused kernels without backward: generation.
    Fast,
    /// Differentiable ops only: training.
    Diff,
}

#[derive(Debug, Clone)]
pub(crate) struct Block {
    pub(crate) attn_norm: Tensor,
    pub(crate) q: Linear,
    pub(crate) k: Linear,
    pub(crate) v: Linear,
    pub(crate) o: Linear,
    pub(crate) ffn_norm: Tensor,
    pub(crate) gate: Linear,
    pub(crate) up: Linear,
    pub(crate) down: Linear,
}

impl Block {
    pub(crate) fn linears(&self) -> [&Linear; 7] {
        [&self.q, &self.k, &self.v, &self.o, &self.gate, &self.up, &self.down]
    }
}

/// Positions and visibility for one forward over `(b, q)` new positions.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    /// RoPE position of each new entry, row-major `(b, q)`; `None` means every row uses
    /// `cache.len .. cache.len + q`.
    pub(crate) positions: Option<Vec<u32>>,
    /// Additive mask broadcastable to `(b, 1, 1, q, past + q)`; `None` means plain causal.
    pub(crate) mask: Option<Tensor>,
    /// With a `mask`: the one run of keys `(start, len)` each row's mask hides beside the
    /// causal structure (its padding), so that attention can skip it instead of adding the
    /// mask. `None` where the mask is anything else.
    pub(crate) hidden: Option<Arc<[(usize, usize)]>>,
    /// Cached keys `[start, end)` whose keys and values are constants of a training graph
    /// (a detached prompt head): the attention's backward gives them no gradient.
    pub(crate) constant_keys: (usize, usize),
    /// Whether the new positions are decoded tokens rather than a prompt's. On the CPU a
    /// decoded position attends through [`DecodeAttention`] however many a pass feeds (a
    /// row's forced tokens go in one pass alone, one per step in a batch), and a prompt's
    /// through the fused [`CausalAttention`] however few a chunk holds (one, for the last
    /// token of a prompt alone): each position then gets the same bits whichever pass and
    /// batch compute it.
    pub(crate) decode: bool,
    /// Decoded positions only: per row, `(source row, keys)` where the row's first `keys`
    /// cached keys and values hold the same bits as the source row's (see
    /// [`DecodeAttention::shared`]), so that attention reads them once for all such rows.
    pub(crate) shared_keys: Option<Arc<[(usize, usize)]>>,
}

/// What one layer's attention may see: a step's mask, and the run of keys it hides per row;
/// and which keys need no gradient.
#[derive(Clone, Copy)]
pub(crate) struct Attend<'a> {
    pub(crate) mask: Option<&'a Tensor>,
    pub(crate) hidden: Option<&'a Arc<[(usize, usize)]>>,
    pub(crate) constant_keys: (usize, usize),
    pub(crate) decode: bool,
    pub(crate) shared_keys: Option<&'a Arc<[(usize, usize)]>>,
}

impl Step {
    /// Plain causal attention at the cache's own positions.
    pub(crate) fn causal() -> Step {
        Step { positions: None, mask: None, hidden: None, constant_keys: (0, 0), decode: false, shared_keys: None }
    }

    /// Plain causal attention of decoded tokens at the cache's own positions.
    pub(crate) fn decode() -> Step {
        Step { decode: true, ..Step::causal() }
    }

    /// This step, with cached keys `keys` constants of the graph (see [`Step::constant_keys`]).
    pub(crate) fn with_constant_keys(self, keys: std::ops::Range<usize>) -> Step {
        Step { constant_keys: (keys.start, keys.end), ..self }
    }
}

/// The backbone: embedding, decoder layers, final norm and output matrix.
#[derive(Debug, Clone)]
pub(crate) struct Backbone {
    pub(crate) cfg: ArchConfig,
    pub(crate) embed: Weight,
    pub(crate) blocks: Vec<Block>,
    pub(crate) norm: Tensor,
    pub(crate) lm_head: Weight,
    cos: Tensor,
    sin: Tensor,
}

/// Large negative instead of -inf: a fully masked row (a left pad with nothing before
/// it) then gives a uniform softmax instead of NaN that would spread through the cache.
pub(crate) const MASKED: f32 = -1e9;

impl Backbone {
    pub(crate) fn new(
        cfg: ArchConfig,
        embed: Weight,
        blocks: Vec<Block>,
        norm: Tensor,
        lm_head: Weight,
        max_positions: usize,
    ) -> Result<Self> {
        let half = cfg.head_dim / 2;
        let inv_freq: Vec<f32> = (0..half)
            .map(|i| 1.0 / (cfg.rope_theta as f32).powf(2.0 * i as f32 / cfg.head_dim as f32))
            .collect();
        // The tables live where the weights do.
        let dev = norm.device();
        let inv_freq = Tensor::from_vec(inv_freq, (1, half), dev)?;
        let t = Tensor::arange(0u32, max_positions as u32, dev)?
            .to_dtype(DType::F32)?
            .reshape((max_positions, 1))?;
        let freqs = t.broadcast_mul(&inv_freq)?;
        Ok(Backbone { cfg, embed, blocks, norm, lm_head, cos: freqs.cos()?, sin: freqs.sin()? })
    }

    /// Where the weights, and so every tensor of a forward, live.
    pub(crate) fn device(&self) -> &Device {
        self.cos.device()
    }

    /// Whether a causal step's attention runs as one fused op ([`CausalAttention`]: CPU, f32
    /// activations), which holds no score matrix: a prefill chunk is then bounded by its
    /// positions alone, not by its positions times the keys.
    pub(crate) fn fuses_causal_attention(&self) -> bool {
        fuses_on(self.device(), self.norm.dtype())
    }

    /// Largest number of positions the rotary tables cover.
    pub(crate) fn max_positions(&self) -> usize {
        self.cos.dim(0).unwrap_or(0)
    }

    /// Number of backbone parameters (embedding, layers, norms, untied output).
    pub(crate) fn param_count(&self) -> usize {
        let mut n = self.embed.elem_count() + self.norm.elem_count();
        if !self.is_tied() {
            n += self.lm_head.elem_count();
        }
        for b in &self.blocks {
            n += b.attn_norm.elem_count() + b.ffn_norm.elem_count();
            for l in b.linears() {
                n += l.w.elem_count() + l.b.as_ref().map_or(0, |b| b.elem_count());
            }
        }
        n
    }

    /// Whether every projection and the output matrix are quantized matrices whose products
    /// have an input-only backward: our tiles ([`FrozenProduct`]) or candle's quantized
    /// blocks on the CPU ([`FrozenQuant`]).
    pub(crate) fn frozen_quantized(&self) -> bool {
        let ok = |w: &Weight| match w {
            Weight::Tiled(_) => true,
            Weight::Quant(QMatMul::QTensor(q)) => q.device().is_cpu(),
            _ => false,
        };
        ok(&self.lm_head) && self.blocks.iter().all(|b| b.linears().iter().all(|l| ok(&l.w)))
    }

    /// Whether the output matrix is the embedding matrix.
    pub(crate) fn is_tied(&self) -> bool {
        match (&self.embed, &self.lm_head) {
            (
                Weight::Quant(QMatMul::QTensor(a)),
                Weight::Quant(QMatMul::QTensor(b)),
            ) => Arc::ptr_eq(a, b),
            (Weight::Tiled(a), Weight::Tiled(b)) => Arc::ptr_eq(a, b),
            (Weight::Dense(a), Weight::Dense(b)) => a.id() == b.id(),
            _ => false,
        }
    }

    /// Token embeddings `(b, q, hidden)` of ids `(b, q)`.
    pub(crate) fn embed(&self, ids: &Tensor) -> Result<Tensor> {
        self.embed.embedding(ids)
    }

    /// Runs the layers over new embeddings `x (b, q, hidden)` and returns the final-norm
    /// hidden states `(b, q, hidden)`. With a cache, keys/values are appended to it.
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        step: &Step,
        mut cache: Option<&mut KvCache>,
        role: &RoleView,
        mode: Mode,
    ) -> Result<Tensor> {
        let (b, q, _) = x.dims3()?;
        let past = cache.as_ref().map_or(0, |c| c.len);
        let (cos, sin) = self.rope_tables(b, q, past, step.positions.as_deref())?;
        let mask = match (&step.mask, q, mode) {
            (Some(m), _, _) => Some(m.clone()),
            (None, 1, _) => None,
            // The fused attention masks by itself, past included (query i sees keys
            // 0 ..= past + i), and so does the differentiable path elsewhere.
            (None, _, Mode::Diff) => None,
            (None, _, Mode::Fast) if fused_causal(x) => None,
            (None, _, Mode::Fast) => Some(causal_mask(q, past, self.device())?),
        };
        let mut x = x.clone();
        for (i, block) in self.blocks.iter().enumerate() {
            let layer_cache = cache.as_mut().map(|c| &mut c.layers[i]);
            let attend = Attend {
                mask: mask.as_ref(),
                hidden: step.hidden.as_ref(),
                constant_keys: step.constant_keys,
                decode: step.decode,
                shared_keys: step.shared_keys.as_ref(),
            };
            x = self.block_forward(i, block, &x, &cos, &sin, attend, layer_cache, past, role, mode)?;
        }
        if let Some(c) = cache {
            c.len += q;
        }
        rms_norm(&x, &self.norm, self.cfg.rms_norm_eps, mode)
    }

    /// Logits `(.., vocab)` of final hidden states.
    pub(crate) fn logits(&self, hidden: &Tensor) -> Result<Tensor> {
        self.lm_head.matmul(hidden)
    }

    /// [`Backbone::logits`] for generation: each row's bits its own (see
    /// [`Weight::matmul_rows`]), whatever rows share the call.
    pub(crate) fn row_logits(&self, hidden: &Tensor) -> Result<Tensor> {
        self.lm_head.matmul_rows(hidden)
    }

    pub(crate) fn rope_tables(
        &self,
        b: usize,
        q: usize,
        past: usize,
        positions: Option<&[u32]>,
    ) -> Result<(Tensor, Tensor)> {
        match positions {
            None => {
                if past + q > self.max_positions() {
                    return Err(candle_core::Error::Msg(format!(
                        "position {} beyond the rotary table of {}",
                        past + q,
                        self.max_positions()
                    ))
                    .into());
                }
                Ok((self.cos.narrow(0, past, q)?, self.sin.narrow(0, past, q)?))
            }
            Some(pos) => {
                if let Some(&p) = pos.iter().find(|&&p| p as usize >= self.max_positions()) {
                    return Err(candle_core::Error::Msg(format!(
                        "position {p} beyond the rotary table of {}",
                        self.max_positions()
                    ))
                    .into());
                }
                let idx = Tensor::new(pos, self.cos.device())?;
                let half = self.cfg.head_dim / 2;
                Ok((
                    self.cos.index_select(&idx, 0)?.reshape((b, q, half))?,
                    self.sin.index_select(&idx, 0)?.reshape((b, q, half))?,
                ))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn block_forward(
        &self,
        layer: usize,
        blk: &Block,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        attend: Attend<'_>,
        cache: Option<&mut Option<LayerKv>>,
        past: usize,
        role: &RoleView,
        mode: Mode,
    ) -> Result<Tensor> {
        let cfg = &self.cfg;
        let mask = attend.mask;
        let (b, q_len, _) = x.dims3()?;
        let (n_h, n_kv, hd) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
        let n_rep = n_h / n_kv;

        let h = rms_norm(x, &blk.attn_norm, cfg.rms_norm_eps, mode)?;
        let q = blk.q.forward(&h, role.get(layer, 0), mode)?;
        let k = blk.k.forward(&h, role.get(layer, 1), mode)?;
        let v = blk.v.forward(&h, role.get(layer, 2), mode)?;
        let q = q.reshape((b, q_len, n_h, hd))?.transpose(1, 2)?.contiguous()?;
        let k = k.reshape((b, q_len, n_kv, hd))?.transpose(1, 2)?.contiguous()?;
        let v = v.reshape((b, q_len, n_kv, hd))?.transpose(1, 2)?.contiguous()?;
        let q = rope(&q, cos, sin, cfg.rope_interleaved, mode)?;
        let k = rope(&k, cos, sin, cfg.rope_interleaved, mode)?;

        // Decoded tokens on the CPU, with no mask or one that hides a run of keys per row
        // (alone or batched): read the cache in place instead of packing it for two tiny
        // matmuls, and skip the hidden keys instead of adding a mask and taking e^-1e9.
        let plain = mask.is_none() || attend.hidden.is_some();
        let decode_attention = mode == Mode::Fast && attend.decode && plain && q.device().is_cpu() && q.dtype() == DType::F32;
        // The keys and values to attend, and, for the decode attention, the buffer row of each
        // batch row where finished rows were dropped from the cache's map.
        let (k, v, buffer_rows) = match (cache, mode) {
            // Generation writes into the cache's buffers; the past is not copied per step.
            (Some(slot), Mode::Fast) => {
                match slot.as_mut() {
                    Some(layer) => layer.append_in_place(past, &k, &v)?,
                    None => *slot = Some(LayerKv::with_room(None, &k, &v)?),
                }
                let layer = slot.as_ref().expect("just written");
                match decode_attention {
                    true => layer.live_in_place(past + q_len)?,
                    false => {
                        let (k, v) = layer.live(past + q_len)?;
                        (k, v, None)
                    }
                }
            }
            // Training keeps the graph: an in-place write would not be tracked.
            (Some(slot), Mode::Diff) => {
                let (k, v) = match slot.as_ref() {
                    Some(layer) => {
                        let (pk, pv) = layer.live(past)?;
                        (Tensor::cat(&[&pk, &k], 2)?, Tensor::cat(&[&pv, &v], 2)?)
                    }
                    None => (k, v),
                };
                *slot = Some(LayerKv::exact(k.clone(), v.clone())?);
                (k, v, None)
            }
            (None, _) => (k, v, None),
        };
        let kv_len = k.dim(2)?;

        if decode_attention {
            let scale = 1.0 / (hd as f32).sqrt();
            let hidden = attend.hidden.filter(|_| mask.is_some()).cloned();
            let op = DecodeAttention { scale, hidden, shared: attend.shared_keys.cloned(), rows: buffer_rows };
            let attn = q.apply_op3_no_bwd(&k, &v, &op)?;
            let attn = attn.transpose(1, 2)?.reshape((b, q_len, n_h * hd))?;
            let x = (x + blk.o.forward(&attn, role.get(layer, 3), mode)?)?;
            return self.mlp(layer, blk, &x, role, mode);
        }

        // Grouped-query attention without copying K/V: the n_rep query heads that share a
        // KV head are folded into the query-length axis.
        // The 1/√d scale goes on q (small) rather than on the scores (q_len × kv_len).
        let qg = (q * (1.0 / (hd as f64).sqrt()))?.reshape((b, n_kv, n_rep * q_len, hd))?;
        // What the fused op can attend: plain causal, or causal less one run of keys per row
        // (a padded batch's padding, which the step names beside its mask).
        let fusable = match mask {
            None => Some(None),
            Some(_) => attend.hidden.map(|h| Some(h.clone())),
        };
        let attn = match (mode, fusable) {
            // The causal case: one op that builds no score matrix. In training it keeps
            // none for the backward either (a 384-token Judge tail against a 1,400-token
            // prompt kept 1.4 GB of them over the 0.5B model's layers), recomputing them
            // there instead; in prefill it skips the masked half of a long prompt's scores,
            // and a padded batch's padding without adding a mask and taking e^−10⁹ (libm's
            // slow underflow path) for every hidden key.
            (mode, Some(hidden)) if fused_causal(&qg) => {
                let op = CausalAttention { q_len, constant_keys: attend.constant_keys, hidden };
                let (qg, k, v) = (qg.contiguous()?, k.contiguous()?, v.contiguous()?);
                match mode {
                    Mode::Diff => qg.apply_op3(&k, &v, op)?,
                    Mode::Fast => qg.apply_op3_no_bwd(&k, &v, &op)?,
                }
            }
            _ => {
                let scores = qg.matmul(&k.t()?)?.reshape((b, n_kv, n_rep, q_len, kv_len))?;
                let probs = match (mode, mask) {
                    (Mode::Fast, Some(m)) => candle_nn::ops::softmax_last_dim(&scores.broadcast_add(m)?)?,
                    (Mode::Fast, None) => candle_nn::ops::softmax_last_dim(&scores)?,
                    (Mode::Diff, Some(m)) => candle_nn::ops::softmax(&scores.broadcast_add(m)?, D::Minus1)?,
                    // The fused op is CPU code; elsewhere the mask is added as in generation.
                    (Mode::Diff, None) => {
                        let mask = causal_mask(q_len, kv_len - q_len, scores.device())?;
                        candle_nn::ops::softmax(&scores.broadcast_add(&mask)?, D::Minus1)?
                    }
                };
                probs.reshape((b, n_kv, n_rep * q_len, kv_len))?.matmul(&v)?
            }
        };
        let attn = attn.reshape((b, n_h, q_len, hd))?.transpose(1, 2)?.reshape((b, q_len, n_h * hd))?;
        let x = (x + blk.o.forward(&attn, role.get(layer, 3), mode)?)?;
        self.mlp(layer, blk, &x, role, mode)
    }

    /// The block's second half: the gated MLP with its residual.
    fn mlp(&self, layer: usize, blk: &Block, x: &Tensor, role: &RoleView, mode: Mode) -> Result<Tensor> {
        let h = rms_norm(x, &blk.ffn_norm, self.cfg.rms_norm_eps, mode)?;
        let gate = blk.gate.forward(&h, role.get(layer, 4), mode)?;
        let up = blk.up.forward(&h, role.get(layer, 5), mode)?;
        let mlp = blk.down.forward(&gated(&gate, &up, mode)?, role.get(layer, 6), mode)?;
        Ok((x + mlp)?)
    }
}

/// `silu(gate) · up`: one op with its own backward where the attention fuses too (generation
/// and the learner alike, so both compute one policy), candle's two ops elsewhere.
fn gated(gate: &Tensor, up: &Tensor, mode: Mode) -> Result<Tensor> {
    if !fuses_on(gate.device(), gate.dtype()) {
        return Ok((gate.silu()? * up)?);
    }
    let (gate, up) = (gate.contiguous()?, up.contiguous()?);
    Ok(match mode {
        Mode::Diff => gate.apply_op2(&up, SwiGlu)?,
        Mode::Fast => gate.apply_op2_no_bwd(&up, &SwiGlu)?,
    })
}

/// Whether attention over `x`'s activations runs as the fused [`CausalAttention`].
fn fused_causal(x: &Tensor) -> bool {
    fuses_on(x.device(), x.dtype())
}

/// The fused [`CausalAttention`] is a CPU op on f32 activations.
fn fuses_on(dev: &Device, dtype: DType) -> bool {
    dev.is_cpu() && dtype == DType::F32
}

/// Causal mask `(1, 1, 1, q, past + q)` for `q` new positions after `past` cached ones.
pub(crate) fn causal_mask(q: usize, past: usize, dev: &Device) -> Result<Tensor> {
    let kv = past + q;
    let data: Vec<f32> = (0..q)
        .flat_map(|i| (0..kv).map(move |j| if j <= past + i { 0.0 } else { MASKED }))
        .collect();
    Ok(Tensor::from_vec(data, (1, 1, 1, q, kv), dev)?)
}

pub(crate) fn rms_norm(x: &Tensor, w: &Tensor, eps: f64, mode: Mode) -> Result<Tensor> {
    match mode {
        Mode::Fast => Ok(candle_nn::ops::rms_norm(&x.contiguous()?, w, eps as f32)?),
        Mode::Diff => {
            let hidden = x.dim(D::Minus1)? as f64;
            let ms = (x.sqr()?.sum_keepdim(D::Minus1)? / hidden)?;
            Ok(x.broadcast_div(&(ms + eps)?.sqrt()?)?.broadcast_mul(w)?)
        }
    }
}

/// Rotary embedding of `x (b, h, q, hd)` with tables `(q, hd/2)` or `(b, q, hd/2)`.
fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor, interleaved: bool, mode: Mode) -> Result<Tensor> {
    if mode == Mode::Fast {
        let f = if interleaved { candle_nn::rotary_emb::rope_i } else { candle_nn::rotary_emb::rope };
        return Ok(f(x, cos, sin)?);
    }
    let (b, h, q, hd) = x.dims4()?;
    let half = hd / 2;
    // Tables to (b|1, 1, q, half) so they broadcast over heads.
    let (cos, sin) = match cos.rank() {
        2 => (cos.reshape((1, 1, q, half))?, sin.reshape((1, 1, q, half))?),
        _ => (cos.unsqueeze(1)?, sin.unsqueeze(1)?),
    };
    if interleaved {
        let xr = x.reshape((b, h, q, half, 2))?;
        let x0 = xr.narrow(D::Minus1, 0, 1)?.squeeze(D::Minus1)?;
        let x1 = xr.narrow(D::Minus1, 1, 1)?.squeeze(D::Minus1)?;
        let y0 = (x0.broadcast_mul(&cos)? - x1.broadcast_mul(&sin)?)?;
        let y1 = (x0.broadcast_mul(&sin)? + x1.broadcast_mul(&cos)?)?;
        Ok(Tensor::stack(&[y0, y1], D::Minus1)?.reshape((b, h, q, hd))?)
    } else {
        let x0 = x.narrow(D::Minus1, 0, half)?;
        let x1 = x.narrow(D::Minus1, half, half)?;
        let y0 = (x0.broadcast_mul(&cos)? - x1.broadcast_mul(&sin)?)?;
        let y1 = (x1.broadcast_mul(&cos)? + x0.broadcast_mul(&sin)?)?;
        Ok(Tensor::cat(&[y0, y1], D::Minus1)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_kernels::{CausalSoftmax, TiledMatrix};

    fn close(a: &Tensor, b: &Tensor, tol: f32) {
        let d = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(d < tol, "max abs diff {d}");
    }

    #[test]
    fn differentiable_rope_and_norm_match_the_fused_kernels() {
        let dev = Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (2, 3, 5, 8), &dev).unwrap();
        let cos = Tensor::randn(0f32, 1.0, (5, 4), &dev).unwrap();
        let sin = Tensor::randn(0f32, 1.0, (5, 4), &dev).unwrap();
        for inter in [false, true] {
            let a = rope(&x, &cos, &sin, inter, Mode::Fast).unwrap();
            let b = rope(&x, &cos, &sin, inter, Mode::Diff).unwrap();
            close(&a, &b, 1e-5);
        }
        // Per-row tables (b, q, half), as batched decoding uses them.
        let cos3 = Tensor::randn(0f32, 1.0, (2, 5, 4), &dev).unwrap();
        let sin3 = Tensor::randn(0f32, 1.0, (2, 5, 4), &dev).unwrap();
        for inter in [false, true] {
            let a = rope(&x, &cos3, &sin3, inter, Mode::Fast).unwrap();
            let b = rope(&x, &cos3, &sin3, inter, Mode::Diff).unwrap();
            close(&a, &b, 1e-5);
        }
        let w = Tensor::randn(0f32, 1.0, 8, &dev).unwrap();
        let x = x.reshape((6, 5, 8)).unwrap();
        close(
            &rms_norm(&x, &w, 1e-5, Mode::Fast).unwrap(),
            &rms_norm(&x, &w, 1e-5, Mode::Diff).unwrap(),
            1e-4,
        );
    }

    #[test]
    fn differentiable_ops_pass_gradients() {
        let dev = Device::Cpu;
        let x = candle_core::Var::randn(0f32, 1.0, (1, 2, 3, 8), &dev).unwrap();
        let cos = Tensor::randn(0f32, 1.0, (3, 4), &dev).unwrap();
        let sin = Tensor::randn(0f32, 1.0, (3, 4), &dev).unwrap();
        let w = candle_core::Var::ones(8, DType::F32, &dev).unwrap();
        let y = rope(x.as_tensor(), &cos, &sin, true, Mode::Diff).unwrap();
        let y = rms_norm(&y, w.as_tensor(), 1e-5, Mode::Diff).unwrap();
        let loss = candle_nn::ops::softmax(&y, D::Minus1).unwrap().sqr().unwrap().sum_all().unwrap();
        let grads = loss.backward().unwrap();
        for v in [&x, &w] {
            let g = grads.get(v.as_tensor()).expect("gradient present");
            let n = g.abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(n > 0.0);
        }
    }

    #[test]
    fn causal_softmax_matches_masked_softmax_with_gradients() {
        let dev = Device::Cpu;
        for past in [0usize, 2] {
            let x = candle_core::Var::randn(0f32, 2.0, (2, 3, 4, 4 + past), &dev).unwrap();
            let y = x.as_tensor().apply_op1(CausalSoftmax).unwrap();
            let m = causal_mask(4, past, &Device::Cpu).unwrap().squeeze(0).unwrap();
            let r = candle_nn::ops::softmax(&x.as_tensor().broadcast_add(&m).unwrap(), D::Minus1).unwrap();
            close(&y, &r, 1e-6);
            let w = Tensor::randn(0f32, 1.0, y.shape(), &dev).unwrap();
            let gy = (&y * &w).unwrap().sum_all().unwrap().backward().unwrap();
            let gr = (&r * &w).unwrap().sum_all().unwrap().backward().unwrap();
            close(gy.get(x.as_tensor()).unwrap(), gr.get(x.as_tensor()).unwrap(), 1e-5);
        }
    }

    #[test]
    fn a_tiled_matrix_serves_like_candles_q8_0() {
        use candle_core::quantized::{GgmlDType, QTensor};
        if !TiledMatrix::available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI");
            return;
        }
        let (rows, cols) = (32, 96);
        let v: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37).sin() * (1.0 + (i % 5) as f32)).collect();
        let w = Tensor::from_vec(v, (rows, cols), &Device::Cpu).unwrap();
        let q = Arc::new(QTensor::quantize(&w, GgmlDType::Q8_0).unwrap());
        let tiled = Weight::Tiled(Arc::new(TiledMatrix::from_qtensor(&q).unwrap().unwrap()));
        let candle = Weight::Quant(QMatMul::from_arc(q).unwrap());
        assert_eq!(tiled.elem_count(), rows * cols);
        close(&tiled.dequantize().unwrap(), &candle.dequantize().unwrap(), 1e-6);
        let ids = Tensor::new(&[[3u32, 0, 31]], &Device::Cpu).unwrap();
        close(&tiled.embedding(&ids).unwrap(), &candle.embedding(&ids).unwrap(), 1e-6);
        for n in [1, 3] {
            let x = Tensor::from_vec((0..n * cols).map(|i| (i as f32 * 0.11).cos()).collect::<Vec<f32>>(), (1, n, cols), &Device::Cpu).unwrap();
            let (a, b) = (tiled.matmul(&x).unwrap(), candle.matmul(&x).unwrap());
            assert_eq!(a.dims(), &[1, n, rows]);
            // Both quantize the activations in Q8_0 blocks of 32; only rounding differs.
            let scale = b.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
            close(&a, &b, 0.01 * scale);
        }
    }

    #[test]
    fn causal_mask_shape_and_values() {
        let m = causal_mask(2, 3, &Device::Cpu).unwrap();
        assert_eq!(m.dims(), &[1, 1, 1, 2, 5]);
        let v: Vec<f32> = m.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(&v[..5], &[0.0, 0.0, 0.0, 0.0, MASKED]);
        assert_eq!(&v[5..], &[0.0; 5]);
    }

    /// A one-layer cache of `rows` rows whose slot `s` of row `r` holds `10 r + s + 1` in
    /// keys and values alike (one head, head size 1).
    fn numbered(rows: usize, len: usize) -> KvCache {
        let data: Vec<f32> = (0..rows).flat_map(|r| (0..len).map(move |s| (10 * r + s + 1) as f32)).collect();
        let t = Tensor::from_vec(data, (rows, 1, len, 1), &Device::Cpu).unwrap();
        KvCache { layers: vec![Some(LayerKv::exact(t.clone(), t).unwrap())], len }
    }

    fn slots(cache: &KvCache) -> Vec<Vec<f32>> {
        let (k, v) = cache.layers[0].as_ref().unwrap().live(cache.len).unwrap();
        let (k, v) = (k.squeeze(3).unwrap().squeeze(1).unwrap(), v.squeeze(3).unwrap().squeeze(1).unwrap());
        assert_eq!(k.to_vec2::<f32>().unwrap(), v.to_vec2::<f32>().unwrap());
        k.to_vec2().unwrap()
    }

    #[test]
    fn widened_batches_hold_zeros_where_each_part_says() {
        // A 3-slot batch of one row widened at slot 2 and a 5-slot batch of two rows.
        let (short, long) = (numbered(1, 3), numbered(2, 5));
        let stacked = KvCache::stack_widened(&[(&short, 2), (&long, 4)], 5).unwrap();
        assert_eq!(stacked.len, 5);
        assert_eq!(slots(&stacked), vec![vec![1., 2., 0., 0., 3.], vec![1., 2., 3., 4., 5.], vec![11., 12., 13., 14., 15.]]);
        // Widened at its end, or at its start.
        assert_eq!(slots(&KvCache::stack_widened(&[(&short, 3)], 4).unwrap()), vec![vec![1., 2., 3., 0.]]);
        assert_eq!(slots(&KvCache::stack_widened(&[(&short, 0)], 4).unwrap()), vec![vec![0., 1., 2., 3.]]);
    }
}
