//! The MLP's gate, `silu(gate) · up`, as one op with its own backward.
//!
//! Through candle's ops it is two ops forward and about a dozen element-wise passes backward
//! (silu's derivative alone takes five, each writing a fresh tensor of the MLP's width: 2.3 MB
//! at a 120-token tail of the 0.5B model, 24 layers, every sample of an update). Here the
//! forward is one pass and the backward one pass that writes both gradients.
//!
//! The sigmoid takes its exponential from [`exp_nonpositive`], which vectorizes, instead of
//! libm's `expf`, a call per element: one per MLP activation of every prefilled and decoded
//! token, which made `expf` 8 % of a training step's rollouts. Generation and the learner run
//! this same op, so the policy they compute stays one.

use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Shape, Tensor};

use crate::{
    attention::exp_nonpositive,
    causal_attention::{slice, span},
};

/// `silu(gate) · up` element-wise, `silu(g) = g · σ(g)`. Both inputs f32, contiguous, of one
/// shape.
#[derive(Debug, Clone, Copy)]
pub struct SwiGlu;

/// Elements per task of the compute pool: a few pages, so both cores share even a short tail.
const CHUNK: usize = 16 * 1024;

/// Runs `f(range)` over `0..n` in chunks on the compute pool, each chunk's outputs its own.
fn in_chunks(n: usize, f: impl Fn(std::ops::Range<usize>) + Sync) {
    crate::pool::execute_chunked(n.div_ceil(CHUNK), |items| {
        for item in items {
            f(item * CHUNK..((item + 1) * CHUNK).min(n));
        }
    });
}

/// `σ(g) = 1 / (1 + e^−g)` from `t = e^−|g|`, which never overflows: `1 / (1 + t)` for
/// `g ≥ 0`, `t / (1 + t)` below. Within a few ulps of the libm-based formula.
#[inline(always)]
fn sigmoid(g: f32) -> f32 {
    let t = exp_nonpositive(-g.abs());
    let inv = 1.0 / (1.0 + t);
    if g >= 0.0 { inv } else { t * inv }
}

impl CustomOp2 for SwiGlu {
    fn name(&self) -> &'static str {
        "swiglu"
    }

    fn cpu_fwd(&self, gs: &CpuStorage, gl: &Layout, us: &CpuStorage, ul: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        if gl.shape() != ul.shape() {
            candle_core::bail!("swiglu: gate {:?} but up {:?}", gl.shape().dims(), ul.shape().dims());
        }
        let (gate, up) = (slice(gs, gl)?, slice(us, ul)?);
        let mut out = vec![0f32; gate.len()];
        let addr = out.as_mut_ptr() as usize;
        in_chunks(gate.len(), |r| {
            // SAFETY: each chunk of `out` belongs to one task.
            let o = unsafe { span(addr, r.start, r.len()) };
            for ((o, &g), &u) in o.iter_mut().zip(&gate[r.clone()]).zip(&up[r]) {
                *o = g * sigmoid(g) * u;
            }
        });
        Ok((CpuStorage::F32(out), gl.shape().clone()))
    }

    fn bwd(&self, gate: &Tensor, up: &Tensor, _out: &Tensor, grad: &Tensor) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let both = gate.apply_op3_no_bwd(up, &grad.contiguous()?, &SwiGluGrad)?;
        let n = gate.elem_count();
        let d_gate = both.narrow(0, 0, n)?.reshape(gate.shape())?;
        let d_up = both.narrow(0, n, n)?.reshape(up.shape())?;
        Ok((Some(d_gate), Some(d_up)))
    }
}

/// The backward of [`SwiGlu`] from the gate, the up projection and the output's gradient `d`:
/// `d_gate = d · u · σ(g) · (1 + g (1 − σ(g)))` and `d_up = d · silu(g)`, laid end to end.
struct SwiGluGrad;

impl CustomOp3 for SwiGluGrad {
    fn name(&self) -> &'static str {
        "swiglu-grad"
    }

    fn cpu_fwd(
        &self,
        gs: &CpuStorage,
        gl: &Layout,
        us: &CpuStorage,
        ul: &Layout,
        ds: &CpuStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        if gl.shape() != ul.shape() || gl.shape() != dl.shape() {
            candle_core::bail!("swiglu-grad: gate {:?}, up {:?}, gradient {:?}", gl.shape().dims(), ul.shape().dims(), dl.shape().dims());
        }
        let (gate, up, d) = (slice(gs, gl)?, slice(us, ul)?, slice(ds, dl)?);
        let n = gate.len();
        let mut out = vec![0f32; 2 * n];
        let addr = out.as_mut_ptr() as usize;
        in_chunks(n, |r| {
            // SAFETY: each chunk's elements of both halves belong to one task.
            let (dg, du) = unsafe { (span(addr, r.start, r.len()), span(addr, n + r.start, r.len())) };
            for (i, (dg, du)) in r.zip(dg.iter_mut().zip(du.iter_mut())) {
                let (g, u, d) = (gate[i], up[i], d[i]);
                let s = sigmoid(g);
                *dg = d * u * s * (1.0 + g * (1.0 - s));
                *du = d * g * s;
            }
        });
        Ok((CpuStorage::F32(out), Shape::from(2 * n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn wavy(n: usize, phase: f32, scale: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32) * 0.37 + phase).sin() * scale).collect()
    }

    #[test]
    fn gives_candles_silu_times_up_and_its_gradients() {
        // Wider than one chunk, so that the pool splits it; gates past ±20 test the tails.
        let shape = (3, 41, 517);
        let n = 3 * 41 * 517;
        let gate = Var::from_vec(wavy(n, 0.1, 24.0), shape, &Device::Cpu).unwrap();
        let up = Var::from_vec(wavy(n, 1.3, 2.0), shape, &Device::Cpu).unwrap();
        let weights = Tensor::from_vec(wavy(n, 2.9, 1.0), shape, &Device::Cpu).unwrap();

        let fused = gate.as_tensor().apply_op2(up.as_tensor(), SwiGlu).unwrap();
        let plain = (gate.as_tensor().silu().unwrap() * up.as_tensor()).unwrap();
        let values = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (x, y) in values(&fused).iter().zip(values(&plain)) {
            assert!((x - y).abs() <= 1e-6 * y.abs() + 1e-30, "silu(g)·u {x} against candle's {y}");
        }

        let grads = |y: &Tensor| {
            let g = (y * &weights).unwrap().sum_all().unwrap().backward().unwrap();
            (g.get(gate.as_tensor()).unwrap().clone(), g.get(up.as_tensor()).unwrap().clone())
        };
        let ((fg, fu), (pg, pu)) = (grads(&fused), grads(&plain));
        for (a, b, what) in [(fg, pg, "gate"), (fu, pu, "up")] {
            let (a, b) = (a.flatten_all().unwrap().to_vec1::<f32>().unwrap(), b.flatten_all().unwrap().to_vec1::<f32>().unwrap());
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "d {what}: {x} against candle's {y}");
            }
        }
    }
}
