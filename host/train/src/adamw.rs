//! AdamW with its state in the open, so a checkpoint can save and restore it exactly.
//!
//! The update is candle-nn's `AdamW` (decoupled weight decay, bias-corrected moments),
//! checked against it in the tests; candle keeps its moments private, and a resumed run
//! that restarts them from zero does not continue the same trajectory.

use std::collections::HashMap;

use candle_core::{Tensor, Var};
use serde::{Deserialize, Serialize};

/// AdamW's settings (candle's `ParamsAdamW` defaults, the learning rate the paper's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdamWParams {
    /// Learning rate.
    pub lr: f64,
    /// First-moment decay.
    pub beta1: f64,
    /// Second-moment decay.
    pub beta2: f64,
    /// Denominator guard.
    pub eps: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
}

impl Default for AdamWParams {
    fn default() -> Self {
        AdamWParams {
            lr: 3e-5,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
        }
    }
}

/// AdamW over named variables.
#[derive(Debug)]
pub struct AdamW {
    params: AdamWParams,
    vars: Vec<(String, Var)>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    step: u64,
}

impl AdamW {
    /// An optimizer over `vars` (names are the checkpoint keys), moments at zero.
    pub fn new(vars: Vec<(String, Var)>, params: AdamWParams) -> candle_core::Result<AdamW> {
        let zeros = |v: &Var| v.as_detached_tensor().zeros_like();
        let m = vars
            .iter()
            .map(|(_, v)| zeros(v))
            .collect::<candle_core::Result<_>>()?;
        let v = vars
            .iter()
            .map(|(_, v)| zeros(v))
            .collect::<candle_core::Result<_>>()?;
        Ok(AdamW {
            params,
            vars,
            m,
            v,
            step: 0,
        })
    }

    /// The variables, in order.
    pub fn vars(&self) -> &[(String, Var)] {
        &self.vars
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// One step with one gradient per variable (`None`: the variable got none and is left
    /// alone, its moments too).
    pub fn step(&mut self, grads: &[Option<Tensor>]) -> candle_core::Result<()> {
        assert_eq!(
            grads.len(),
            self.vars.len(),
            "one gradient slot per variable"
        );
        self.step += 1;
        let p = &self.params;
        let t = self.step as i32;
        let scale_m = 1.0 / (1.0 - p.beta1.powi(t));
        let scale_v = 1.0 / (1.0 - p.beta2.powi(t));
        for (i, g) in grads.iter().enumerate() {
            let Some(g) = g else { continue };
            let theta = self.vars[i].1.as_detached_tensor();
            let m = ((&self.m[i] * p.beta1)? + (g * (1.0 - p.beta1))?)?;
            let v = ((&self.v[i] * p.beta2)? + (g.sqr()? * (1.0 - p.beta2))?)?;
            let m_hat = (&m * scale_m)?;
            let v_hat = (&v * scale_v)?;
            let decayed = (theta * (1.0 - p.lr * p.weight_decay))?;
            let next = (decayed - (m_hat * p.lr)?.div(&(v_hat.sqrt()? + p.eps)?)?)?;
            self.vars[i].1.set(&next)?;
            self.m[i] = m;
            self.v[i] = v;
        }
        Ok(())
    }

    /// The moments as named tensors (`m.{name}`, `v.{name}`) and the step count.
    pub fn state(&self) -> (HashMap<String, Tensor>, u64) {
        let mut out = HashMap::new();
        for (i, (name, _)) in self.vars.iter().enumerate() {
            out.insert(format!("m.{name}"), self.m[i].clone());
            out.insert(format!("v.{name}"), self.v[i].clone());
        }
        (out, self.step)
    }

    /// Restores what [`AdamW::state`] returned; every variable's moments must be there
    /// with the right shape, or nothing changes.
    pub fn load_state(
        &mut self,
        tensors: &HashMap<String, Tensor>,
        step: u64,
    ) -> Result<(), String> {
        let mut m = Vec::with_capacity(self.vars.len());
        let mut v = Vec::with_capacity(self.vars.len());
        for (name, var) in &self.vars {
            for (key, out) in [(format!("m.{name}"), &mut m), (format!("v.{name}"), &mut v)] {
                let t = tensors
                    .get(&key)
                    .ok_or_else(|| format!("optimizer state lacks `{key}`"))?;
                if t.dims() != var.dims() {
                    return Err(format!(
                        "`{key}` has shape {:?}, expected {:?}",
                        t.dims(),
                        var.dims()
                    ));
                }
                out.push(t.clone());
            }
        }
        self.m = m;
        self.v = v;
        self.step = step;
        Ok(())
    }
}

/// Scales gradients so their global L2 norm is at most `max_norm`; returns the norm before.
pub fn clip_grad_norm(grads: &mut [Option<Tensor>], max_norm: f32) -> candle_core::Result<f32> {
    let mut sq = 0f64;
    for g in grads.iter().flatten() {
        sq += f64::from(g.sqr()?.sum_all()?.to_scalar::<f32>()?);
    }
    let norm = sq.sqrt() as f32;
    if max_norm > 0.0 && norm > max_norm {
        let k = f64::from(max_norm / (norm + 1e-6));
        for g in grads.iter_mut().flatten() {
            *g = (&*g * k)?;
        }
    }
    Ok(norm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use candle_nn::Optimizer;

    fn loss(x: &Var) -> Tensor {
        // A small quadratic with a non-trivial gradient field.
        let target = Tensor::new(&[1.0f32, -2.0, 0.5], &Device::Cpu).unwrap();
        (x.as_tensor() - target)
            .unwrap()
            .sqr()
            .unwrap()
            .sum_all()
            .unwrap()
    }

    #[test]
    fn matches_candle_adamw_step_for_step() {
        let p = AdamWParams {
            lr: 0.05,
            weight_decay: 0.1,
            ..Default::default()
        };
        let a = Var::new(&[0.3f32, 0.1, -0.7], &Device::Cpu).unwrap();
        let b = Var::new(&[0.3f32, 0.1, -0.7], &Device::Cpu).unwrap();
        let mut ours = AdamW::new(vec![("x".into(), a.clone())], p.clone()).unwrap();
        let mut theirs = candle_nn::AdamW::new(
            vec![b.clone()],
            candle_nn::ParamsAdamW {
                lr: p.lr,
                beta1: p.beta1,
                beta2: p.beta2,
                eps: p.eps,
                weight_decay: p.weight_decay,
            },
        )
        .unwrap();
        for _ in 0..5 {
            let g = loss(&a)
                .backward()
                .unwrap()
                .get(a.as_tensor())
                .unwrap()
                .clone();
            ours.step(&[Some(g)]).unwrap();
            theirs.backward_step(&loss(&b)).unwrap();
        }
        let (x, y) = (a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
        for (x, y) in x.iter().zip(&y) {
            assert!((x - y).abs() < 1e-6, "{x} vs {y}");
        }
    }

    #[test]
    fn state_round_trip_continues_the_same_trajectory() {
        let p = AdamWParams {
            lr: 0.05,
            ..Default::default()
        };
        let a = Var::new(&[0.3f32, 0.1, -0.7], &Device::Cpu).unwrap();
        let mut first = AdamW::new(vec![("x".into(), a.clone())], p.clone()).unwrap();
        let grad = |x: &Var| {
            loss(x)
                .backward()
                .unwrap()
                .get(x.as_tensor())
                .unwrap()
                .clone()
        };
        for _ in 0..3 {
            first.step(&[Some(grad(&a))]).unwrap();
        }
        let (state, steps) = first.state();
        let b = Var::from_tensor(&a.as_detached_tensor()).unwrap();
        let mut resumed = AdamW::new(vec![("x".into(), b.clone())], p).unwrap();
        resumed.load_state(&state, steps).unwrap();
        first.step(&[Some(grad(&a))]).unwrap();
        resumed.step(&[Some(grad(&b))]).unwrap();
        assert_eq!(a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
        assert!(resumed.load_state(&HashMap::new(), 1).is_err());
    }

    #[test]
    fn clipping_scales_to_the_max_norm() {
        let mut g = vec![
            Some(Tensor::new(&[3.0f32, 4.0], &Device::Cpu).unwrap()),
            None,
        ];
        let n = clip_grad_norm(&mut g, 1.0).unwrap();
        assert!((n - 5.0).abs() < 1e-6);
        let v = g[0].as_ref().unwrap().to_vec1::<f32>().unwrap();
        assert!((v[0] - 0.6).abs() < 1e-5 && (v[1] - 0.8).abs() < 1e-5);
    }
}
