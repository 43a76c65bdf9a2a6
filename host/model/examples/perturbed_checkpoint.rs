//! A checkpoint as after some training, for checks that need adapters that change the
//! answer (`scripts/verify-export.sh`): every LoRA B and the role tokens get seeded normal
//! noise, the Judge head too.
//!
//! `cargo run --release -p onebrain-model --example perturbed_checkpoint -- OUT [MODEL] [RANK] [STD]`
//! (defaults: SmolLM2-135M, rank 4 on all seven projections, 4 role tokens, std 0.02).

use onebrain_model::{Brain, ModelConfig, Tensor};
use rand::{rngs::StdRng, Rng, SeedableRng};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = args.next().ok_or_else(|| anyhow::anyhow!("usage: perturbed_checkpoint OUT [MODEL] [RANK] [STD]"))?;
    let model = args.next().unwrap_or_else(|| onebrain_model::TEST_MODEL_FILE.to_string());
    let rank: usize = args.next().map_or(Ok(4), |s| s.parse())?;
    let std: f32 = args.next().map_or(Ok(0.02), |s| s.parse())?;
    let cfg = ModelConfig { path: model.into(), lora_rank: Some(rank), role_tokens: 4, ..Default::default() };
    let brain = Brain::load(&cfg)?;
    let mut rng = StdRng::seed_from_u64(49);
    let data = brain.trainable().data().lock().expect("varmap lock");
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    for name in names {
        let var = &data[name];
        // B starts at 0 and A at PEFT's init; role tokens start as word embeddings, so
        // noise of their own scale moves them off any word.
        let noise_std = if name.ends_with(".a") { 0.0 } else if name.contains("role_tokens") { 5.0 * std } else { std };
        if noise_std == 0.0 {
            continue;
        }
        let n = var.elem_count();
        let v: Vec<f32> = (0..n)
            .map(|_| {
                let (u, w): (f32, f32) = (rng.gen(), rng.gen());
                noise_std * (-2.0 * (1.0 - u).ln()).sqrt() * (std::f32::consts::TAU * w).cos()
            })
            .collect();
        let noise = Tensor::from_vec(v, var.dims(), brain.device())?;
        var.set(&(var.as_tensor() + noise)?)?;
    }
    drop(data);
    brain.save(std::path::Path::new(&out))?;
    println!("{out}: rank {rank}, all seven projections, 4 role tokens, std {std}");
    Ok(())
}
