//! Block recomputation (activation checkpointing) for the learner's forward over an answer.
//!
//! With a plain graph, every block's activations live until the backward ends: on the 1.5B
//! model a 320-token answer kept about 2.4 GB of them over the 28 blocks, the largest part of
//! the update's peak (the update probe's `PROBE_EVENTS` found 27 tensors of the
//! hidden width and 3 of the MLP's a block and token). [`RecomputedBlock`] makes one block a
//! single graph op over its input and its adapters: the forward keeps only the block's input,
//! and the backward runs the block again with a graph of its own, takes that graph's
//! gradients and drops it before the next block's. The graph then holds one block's
//! activations at a time, for one more forward of every block.
//!
//! The role tokens' keys and values at the front of the cache carry a graph (to the role
//! tokens) and are the op's third input; the prompt's after them are constants.
//!
//! The op's forward runs the plain path's code on the same values, so its outputs (and the
//! log-probabilities after them) are the plain path's bit for bit; the gradients are the same
//! sums, added in another order.

use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp3, DType, Device, Layout, Shape, Tensor, Var};

use onebrain_kernels::slice;
use crate::error::{Error, Result};
use crate::transformer::{rms_norm, Attend, Backbone, KvCache, LayerKv, LoraPair, Mode, RoleView, Step};

impl Backbone {
    /// [`Backbone::forward`] in [`Mode::Diff`] with each block recomputed in the backward
    /// instead of kept (see the module doc). `cache` holds keys and values the attention
    /// reads and this leaves as they are: its first `in_graph` positions may carry a graph
    /// (the role tokens'), the rest are constants (a detached prompt head). CPU, f32.
    pub(crate) fn forward_recomputed(
        &self,
        x: &Tensor,
        step: &Step,
        cache: Option<&KvCache>,
        in_graph: usize,
        role: &RoleView,
    ) -> Result<Tensor> {
        if !x.device().is_cpu() || x.dtype() != DType::F32 {
            return Err(Error::InvalidConfig("block recomputation runs on the CPU in f32".into()));
        }
        let (b, q, _) = x.dims3()?;
        let past = cache.map_or(0, |c| c.len);
        let (cos, sin) = self.rope_tables(b, q, past, step.positions.as_deref())?;
        let backbone = Arc::new(self.clone());
        let mut x = x.clone();
        for layer in 0..self.blocks.len() {
            let (front, past_kv) = match cache.and_then(|c| c.layers[layer].as_ref()) {
                Some(kv) => {
                    let (k, v) = kv.live(past)?;
                    let n = in_graph.min(past);
                    let rest = (k.narrow(2, n, past - n)?.detach(), v.narrow(2, n, past - n)?.detach());
                    let front = match n {
                        0 => Tensor::zeros(0, DType::F32, x.device())?,
                        _ => Tensor::cat(&[k.narrow(2, 0, n)?.flatten_all()?, v.narrow(2, 0, n)?.flatten_all()?], 0)?,
                    };
                    let (b, heads, _, dim) = k.dims4()?;
                    (front, Some(PastKv { front: (b, heads, n, dim), rest }))
                }
                None => (Tensor::zeros(0, DType::F32, x.device())?, None),
            };
            let (packed, adapters) = pack(role, layer, x.device())?;
            let op = RecomputedBlock {
                backbone: backbone.clone(),
                layer,
                cos: cos.clone(),
                sin: sin.clone(),
                mask: step.mask.clone(),
                hidden: step.hidden.clone(),
                constant_keys: step.constant_keys,
                past_kv,
                past,
                adapters,
                scale: role.scale,
            };
            x = x.contiguous()?.apply_op3(&packed, &front, op)?;
        }
        rms_norm(&x, &self.norm, self.cfg.rms_norm_eps, Mode::Diff)
    }
}

/// Layer `layer`'s adapters as one flat tensor (A then B of each adapted projection, in
/// target order, each flattened), with a graph to them; and where each one lies.
fn pack(role: &RoleView, layer: usize, device: &Device) -> Result<(Tensor, Vec<Adapter>)> {
    let mut parts = Vec::new();
    let mut adapters = Vec::new();
    if let Some(pairs) = role.lora.get(layer) {
        for (target, pair) in pairs.iter().enumerate() {
            let Some(pair) = pair else { continue };
            adapters.push(Adapter { target, a: pair.a.dims2()?, b: pair.b.dims2()? });
            parts.push(pair.a.to_dtype(DType::F32)?.flatten_all()?);
            parts.push(pair.b.to_dtype(DType::F32)?.flatten_all()?);
        }
    }
    let packed = match parts.is_empty() {
        true => Tensor::zeros(0, DType::F32, device)?,
        false => Tensor::cat(&parts, 0)?,
    };
    Ok((packed, adapters))
}

/// Where one adapter lies in a packed tensor: its projection and the shapes of A and B.
#[derive(Clone, Copy, Debug)]
struct Adapter {
    target: usize,
    a: (usize, usize),
    b: (usize, usize),
}

/// The keys and values before the new positions: a front of shape `front` that is the op's
/// third input (flattened, keys then values), and the constant rest.
struct PastKv {
    front: (usize, usize, usize, usize),
    rest: (Tensor, Tensor),
}

/// One block as a graph op over `(x, packed adapters, the cache's front)` that keeps no
/// activations.
struct RecomputedBlock {
    backbone: Arc<Backbone>,
    layer: usize,
    cos: Tensor,
    sin: Tensor,
    mask: Option<Tensor>,
    hidden: Option<Arc<[(usize, usize)]>>,
    constant_keys: (usize, usize),
    /// The cached keys and values the block's attention reads before the new positions.
    past_kv: Option<PastKv>,
    past: usize,
    adapters: Vec<Adapter>,
    scale: f64,
}

impl RecomputedBlock {
    /// The block on `x` with the adapters in `packed` and the cache's front `front`, in
    /// [`Mode::Diff`]: with a graph when an input has one.
    fn run(&self, x: &Tensor, packed: &Tensor, front: &Tensor) -> Result<Tensor> {
        let mut lora: Vec<[Option<LoraPair>; 7]> = vec![Default::default(); self.layer + 1];
        let mut offset = 0;
        for ad in &self.adapters {
            let (na, nb) = (ad.a.0 * ad.a.1, ad.b.0 * ad.b.1);
            let a = packed.narrow(0, offset, na)?.reshape(ad.a)?;
            let b = packed.narrow(0, offset + na, nb)?.reshape(ad.b)?;
            offset += na + nb;
            lora[self.layer][ad.target] = Some(LoraPair::new(a, b));
        }
        let view = RoleView { lora, scale: self.scale };
        // A slot of its own, so that the attention reads the constant past as the plain path
        // does and its write (the grown keys and values) goes nowhere.
        let mut slot = match &self.past_kv {
            Some(PastKv { front: shape, rest: (k, v) }) if shape.2 > 0 => {
                let n = shape.0 * shape.1 * shape.2 * shape.3;
                let fk = front.narrow(0, 0, n)?.reshape(*shape)?;
                let fv = front.narrow(0, n, n)?.reshape(*shape)?;
                Some(LayerKv::exact(Tensor::cat(&[&fk, k], 2)?, Tensor::cat(&[&fv, v], 2)?)?)
            }
            Some(PastKv { rest: (k, v), .. }) => Some(LayerKv::exact(k.clone(), v.clone())?),
            None => None,
        };
        let cache = self.past_kv.is_some().then_some(&mut slot);
        let attend = Attend {
            mask: self.mask.as_ref(),
            hidden: self.hidden.as_ref(),
            constant_keys: self.constant_keys,
            decode: false,
            shared_keys: None,
        };
        let block = &self.backbone.blocks[self.layer];
        self.backbone.block_forward(self.layer, block, x, &self.cos, &self.sin, attend, cache, self.past, &view, Mode::Diff)
    }
}

fn to_candle(e: Error) -> candle_core::Error {
    match e {
        Error::Candle(e) => e,
        other => candle_core::Error::Msg(other.to_string()),
    }
}

impl CustomOp3 for RecomputedBlock {
    fn name(&self) -> &'static str {
        "recomputed-block"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        // The op runs where its inputs are, which `forward_recomputed` checked is the CPU.
        let device = self.cos.device();
        let input = |s, l: &Layout| Tensor::from_slice(slice(s, l)?, l.shape(), device);
        let y = self.run(&input(s1, l1)?, &input(s2, l2)?, &input(s3, l3)?).map_err(to_candle)?;
        let shape = y.shape().clone();
        Ok((CpuStorage::F32(y.flatten_all()?.to_vec1::<f32>()?), shape))
    }

    fn bwd(
        &self,
        x: &Tensor,
        packed: &Tensor,
        front: &Tensor,
        _y: &Tensor,
        grad_y: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        // Variables over the inputs' values; an input that needs no gradient (the first
        // block's embeddings) stays a constant, so the backward stops before it.
        let vars = [x, packed, front].map(|t| t.track_op().then(|| Var::from_tensor(&t.detach())).transpose());
        let [x_var, p_var, f_var] = vars;
        let (x_var, p_var, f_var) = (x_var?, p_var?, f_var?);
        if x_var.is_none() && p_var.is_none() && f_var.is_none() {
            return Ok((None, None, None));
        }
        let input = |v: &Option<Var>, t: &Tensor| v.as_ref().map_or_else(|| t.detach(), |v| v.as_tensor().clone());
        let y = self.run(&input(&x_var, x), &input(&p_var, packed), &input(&f_var, front)).map_err(to_candle)?;
        let grads = (y * grad_y.detach())?.sum_all()?.backward()?;
        let grad = |v: &Option<Var>| v.as_ref().and_then(|v| grads.get(v.as_tensor()).cloned());
        Ok((grad(&x_var), grad(&p_var), grad(&f_var)))
    }
}
