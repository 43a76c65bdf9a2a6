//! The role-specific parameters: soft tokens (the role embedding e_ρ), LoRA adapters on
//! the attention and MLP projections the config names (all seven by default), and the Judge head s_J = σ(w·h + b).

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::VarMap;
use rand::{rngs::StdRng, Rng, SeedableRng};

use crate::{
    transformer::{Backbone, LoraPair, RoleView, LORA_TARGETS},
    Result, Role,
};

/// A role's trainable parameters (the `Var`s also live in the [`VarMap`]).
#[derive(Debug, Clone)]
pub(crate) struct RoleParams {
    /// `(role_tokens, hidden)`; `None` when `role_tokens == 0`.
    pub(crate) soft: Option<Var>,
    /// Per layer, the adapters of [`LORA_TARGETS`] as `(A, B)`; `None` for a projection
    /// the config leaves without one (`lora_targets`).
    pub(crate) lora: Vec<[Option<(Var, Var)>; 7]>,
}

/// The Judge's scalar head on the final hidden state.
#[derive(Debug, Clone)]
pub(crate) struct JudgeHead {
    /// `(hidden,)`.
    pub(crate) w: Var,
    /// `(1,)`.
    pub(crate) b: Var,
}

/// LoRA parameters per unit of rank: Σ over layers and adapted targets of (in + out).
pub(crate) fn lora_params_per_rank(backbone: &Backbone, targets: &[bool; 7]) -> usize {
    backbone
        .blocks
        .iter()
        .flat_map(|b| b.linears().into_iter().zip(targets).filter(|(_, on)| **on).map(|(l, _)| l))
        .map(|l| l.shape.0 + l.shape.1)
        .sum()
}

/// The rank that makes one role's parameters ≈ `fraction` of the backbone's.
pub(crate) fn auto_rank(backbone: &Backbone, targets: &[bool; 7], fraction: f64, role_tokens: usize) -> usize {
    let target = fraction * backbone.param_count() as f64
        - (role_tokens * backbone.cfg.hidden_size) as f64;
    let per_rank = lora_params_per_rank(backbone, targets) as f64;
    ((target / per_rank).round() as usize).max(1)
}

/// Registers `t` as a new `Var` named `name`.
fn var(map: &VarMap, name: String, t: Tensor) -> Result<Var> {
    let v = Var::from_tensor(&t)?;
    map.data().lock().expect("varmap lock").insert(name, v.clone());
    Ok(v)
}

/// A fresh role: LoRA A uniform in ±1/√in (PEFT's Kaiming default), B = 0 so the base
/// model is unchanged, and soft tokens copied from the embeddings of `init_tokens` so
/// generation starts from a meaningful (and harmless) prefix instead of noise.
pub(crate) fn init_role(
    map: &VarMap,
    role: Role,
    backbone: &Backbone,
    rank: usize,
    targets: &[bool; 7],
    role_tokens: usize,
    init_tokens: &[u32],
    rng: &mut StdRng,
) -> Result<RoleParams> {
    let dev = backbone.device().clone();
    let soft = if role_tokens > 0 {
        let ids: Vec<u32> = (0..role_tokens)
            .map(|i| init_tokens.get(i).or(init_tokens.last()).copied().unwrap_or(0))
            .collect();
        let emb = backbone.embed(&Tensor::new(ids.as_slice(), &dev)?)?.to_dtype(DType::F32)?;
        Some(var(map, format!("{role}.role_tokens"), emb.contiguous()?)?)
    } else {
        None
    };
    let mut lora = Vec::with_capacity(backbone.blocks.len());
    for (i, block) in backbone.blocks.iter().enumerate() {
        let mut pairs = Vec::with_capacity(7);
        for (t, lin) in block.linears().iter().enumerate() {
            if !targets[t] {
                // No adapter, and no draws from the RNG: the adapters that do exist get
                // the same initial values whatever else is adapted.
                pairs.push(None);
                continue;
            }
            let (out, inp) = lin.shape;
            let bound = 1.0 / (inp as f32).sqrt();
            let a: Vec<f32> = (0..rank * inp).map(|_| rng.gen_range(-bound..bound)).collect();
            let a = Tensor::from_vec(a, (rank, inp), &dev)?;
            let b = Tensor::zeros((out, rank), DType::F32, &dev)?;
            let name = format!("{role}.lora.{i}.{}", LORA_TARGETS[t]);
            pairs.push(Some((var(map, format!("{name}.a"), a)?, var(map, format!("{name}.b"), b)?)));
        }
        let arr: [Option<(Var, Var)>; 7] = pairs.try_into().expect("seven slots");
        lora.push(arr);
    }
    Ok(RoleParams { soft, lora })
}

/// The Judge head: small random w so the head passes gradient to the backbone from the
/// first step (w = 0 would block it), b = 0 so s_J starts near 0.5.
pub(crate) fn init_judge_head(map: &VarMap, hidden: usize, dev: &Device, rng: &mut StdRng) -> Result<JudgeHead> {
    let std = 0.01 / (hidden as f32).sqrt();
    let w: Vec<f32> = (0..hidden).map(|_| (rng.gen::<f32>() * 2.0 - 1.0) * std * 1.732).collect();
    let w = var(map, "judge.head.weight".into(), Tensor::from_vec(w, hidden, dev)?)?;
    let b = var(map, "judge.head.bias".into(), Tensor::zeros(1, DType::F32, dev)?)?;
    Ok(JudgeHead { w, b })
}

impl RoleParams {
    /// The view a forward uses. `detach` for generation (no graph kept alive through the
    /// KV cache); adapters are skipped entirely while every B is zero (fresh roles), which
    /// is exact and saves 2 × 7 small matmuls per layer and token.
    pub(crate) fn view(&self, scale: f64, detach: bool) -> Result<RoleView> {
        let t = |v: &Var| if detach { v.as_detached_tensor() } else { v.as_tensor().clone() };
        if detach && self.lora_is_zero()? {
            return Ok(RoleView { lora: Vec::new(), scale });
        }
        let lora = self
            .lora
            .iter()
            .map(|layer| {
                let v: Vec<Option<LoraPair>> =
                    layer.iter().map(|p| p.as_ref().map(|(a, b)| LoraPair::new(t(a), t(b)))).collect();
                v.try_into().expect("seven slots")
            })
            .collect();
        Ok(RoleView { lora, scale })
    }

    /// Soft tokens `(1, n, hidden)`, or `None`.
    pub(crate) fn soft_tokens(&self, detach: bool) -> Result<Option<Tensor>> {
        Ok(match &self.soft {
            Some(v) => {
                let t = if detach { v.as_detached_tensor() } else { v.as_tensor().clone() };
                Some(t.unsqueeze(0)?)
            }
            None => None,
        })
    }

    fn lora_is_zero(&self) -> Result<bool> {
        for layer in &self.lora {
            for (_, b) in layer.iter().flatten() {
                if b.as_detached_tensor().abs()?.max_all()?.to_scalar::<f32>()? != 0.0 {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// A cheap fingerprint of the current values: prefix caches computed under other
    /// values (before a training step) must not be reused.
    pub(crate) fn fingerprint(&self) -> Result<u64> {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut mix = |t: &Tensor| -> Result<()> {
            let s = t.sum_all()?.to_scalar::<f32>()?;
            let q = t.sqr()?.sum_all()?.to_scalar::<f32>()?;
            for x in [s.to_bits(), q.to_bits()] {
                h ^= x as u64;
                h = h.wrapping_mul(0x100_0000_01b3);
            }
            Ok(())
        };
        if let Some(s) = &self.soft {
            mix(&s.as_detached_tensor())?;
        }
        for layer in &self.lora {
            for (a, b) in layer.iter().flatten() {
                mix(&a.as_detached_tensor())?;
                mix(&b.as_detached_tensor())?;
            }
        }
        Ok(h)
    }

    /// Number of parameters.
    pub(crate) fn param_count(&self) -> usize {
        self.soft.as_ref().map_or(0, |s| s.elem_count())
            + self
                .lora
                .iter()
                .flat_map(|l| l.iter().flatten())
                .map(|(a, b)| a.elem_count() + b.elem_count())
                .sum::<usize>()
    }
}

/// A seeded RNG per purpose, so adding a role never shifts another's initialisation.
pub(crate) fn rng_for(seed: u64, role: Role) -> StdRng {
    StdRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(role.index() as u64 + 1))
}
