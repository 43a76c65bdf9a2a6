//! The Hugging Face safetensors path, on tiny random Qwen2 and Llama checkpoints that the
//! test writes itself (config.json, model.safetensors, tokenizer.json).

use std::path::Path;

use candle_core::DType;
use onebrain_model::{argmax, Brain, Error, ModelConfig, Role, SamplingConfig};
use rand::{rngs::StdRng, SeedableRng};

mod common;
use common::{seeded_normal, write_model, HIDDEN};

fn load(dir: &Path, train_backbone: bool) -> Brain {
    let cfg = ModelConfig { path: dir.to_path_buf(), role_tokens: 2, lora_rank: Some(2), train_backbone, ..Default::default() };
    Brain::load(&cfg).unwrap()
}

fn perturb(brain: &Brain) {
    let mut rng = StdRng::seed_from_u64(5);
    let data = brain.trainable().data().lock().unwrap();
    // Sorted, so each adapter gets the same draw on every run.
    let mut vars: Vec<_> = data.iter().collect();
    vars.sort_by(|a, b| a.0.cmp(b.0));
    for (name, var) in vars {
        if name.ends_with(".b") {
            var.set(&seeded_normal(&mut rng, 0.1, var.dims())).unwrap();
        }
    }
}

#[test]
fn tiny_checkpoints_generate_and_both_paths_agree() {
    for arch in ["qwen2", "llama"] {
        let dir = tempfile::tempdir().unwrap();
        write_model(dir.path(), arch, DType::BF16);
        let mut brain = load(dir.path(), false);
        assert_eq!(brain.arch().hidden_size, HIDDEN);
        assert!(!brain.arch().rope_interleaved);
        perturb(&brain);
        let prompt = brain.chat_prompt("sys", "hello there");
        let tokens = brain.encode(&prompt).unwrap();
        assert_eq!(tokens[0], 257, "<|im_start|> is one token");

        // Fused (generation) and differentiable (training) forwards agree on dense weights.
        for role in [Role::Actor, Role::Editor] {
            let fast = brain.next_token_logits(role, &[tokens.clone()]).unwrap().remove(0);
            let diff: Vec<f32> = brain.logits(role, &tokens).unwrap().get(tokens.len() - 1).unwrap().to_vec1().unwrap();
            let d = fast.iter().zip(&diff).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(d < 1e-3, "{arch} {role}: fused vs differentiable differ by {d}");
        }

        // Teacher forcing: each greedy token is the arg-max of the full differentiable
        // forward at its position, so the KV cache and decode positions are right.
        let g = brain.generate(Role::Actor, &prompt, &SamplingConfig::greedy(8)).unwrap();
        assert!(!g.tokens.is_empty());
        let full: Vec<u32> = tokens.iter().chain(&g.tokens).copied().collect();
        let logits = brain.logits(Role::Actor, &full).unwrap();
        for (j, &tok) in g.tokens.iter().enumerate() {
            let row: Vec<f32> = logits.get(tokens.len() - 1 + j).unwrap().to_vec1().unwrap();
            assert_eq!(argmax(&row), tok, "{arch}: token {j}");
        }

        // Batched rows of different lengths give the same logits as single rows.
        let rows = vec![tokens.clone(), brain.encode("<|im_start|>user\nhi").unwrap(), brain.encode("x").unwrap()];
        let batch = brain.next_token_logits(Role::Actor, &rows).unwrap();
        for (r, b) in rows.iter().zip(&batch) {
            let single = brain.next_token_logits(Role::Actor, &[r.clone()]).unwrap().remove(0);
            let d = single.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
            assert!(d < 1e-4, "{arch}: batched row differs by {d}");
        }
        let s = brain.judge(&prompt).unwrap();
        assert!(s > 0.0 && s < 1.0);
    }
}

#[test]
fn tiny_checkpoint_full_backbone_gets_every_gradient() {
    for arch in ["qwen2", "llama"] {
        let dir = tempfile::tempdir().unwrap();
        write_model(dir.path(), arch, DType::BF16);
        let brain = load(dir.path(), true);
        perturb(&brain);
        let p = brain.encode("<|im_start|>user\nab").unwrap();
        let c = brain.encode("cd").unwrap();
        let lp = brain.batch_logprobs(Role::Actor, &[(p.clone(), c.clone()), (vec![p[0]], c.clone())]).unwrap();
        assert_eq!(lp.logprobs.dims(), &[2, 2]);
        assert_eq!(lp.hidden.dims(), &[2, 2, HIDDEN]);
        let e = brain.sequence_logprobs(Role::Editor, "<|im_start|>x", &c).unwrap();
        let j = brain.judge_logits(&[p.clone(), c.clone()]).unwrap();
        assert_eq!(j.dims(), &[2]);
        let loss = (lp.logprobs.sum_all().unwrap() + e.sum_all().unwrap()).unwrap().neg().unwrap();
        let loss = (loss + j.sum_all().unwrap()).unwrap();
        let grads = loss.backward().unwrap();
        let data = brain.trainable().data().lock().unwrap();
        assert!(data.keys().any(|k| k.starts_with("backbone.model.layers.1.mlp.down_proj")));
        for (name, var) in data.iter() {
            let g = grads.get(var.as_tensor()).unwrap_or_else(|| panic!("{arch}: no gradient for {name}"));
            let n = g.abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(n > 0.0 && n.is_finite(), "{arch}: gradient of {name} is {n}");
        }
    }
}

#[test]
fn bad_checkpoint_directories_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path(), "llama", DType::BF16);
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let cfg = ModelConfig { path: dir.path().to_path_buf(), ..Default::default() };
    assert!(matches!(Brain::load(&cfg), Err(Error::WrongModelFile { .. })));
    let text = std::fs::read_to_string(dir.path().join("config.json")).unwrap().replace("llama", "mamba");
    std::fs::write(dir.path().join("config.json"), text).unwrap();
    assert!(matches!(Brain::load(&cfg), Err(Error::UnsupportedArchitecture(_))));
    std::fs::write(dir.path().join("config.json"), "{not json").unwrap();
    assert!(matches!(Brain::load(&cfg), Err(Error::Json { .. })));
}
