//! Would a Judge head on hidden states saved at sampling time rank as well as the trained
//! Judge? The Judge's design (a short tail through the graph, or a head on saved states) is
//! left to measured AUC and calibration on held-out candidates; this probe measures
//! the second against a finished arm.
//!
//! A head-only Judge never changes the Judge's role parameters, so the hidden state h of a
//! prompt's last token is the same at every update, and the one the sampler computed could be
//! kept. The probe computes h for every training episode's Judge prompt and every held-out
//! candidate of the arm, with the Judge's role at its initial parameters (the run's
//! `init_seed`), fits a logistic-regression head on the training stream up to each held-out
//! evaluation, and sets its held-out AUC and calibration error beside the arm's own Judge's on
//! the same candidates. The head is fitted offline, with L2 weight λ chosen by 5-fold
//! cross-validation on the stream; the arm's Judge learned online with BCE and the band
//! penalty, so the comparison is of features and head, not of the training schedule.
//!
//! ```sh
//! cargo run --release -p onebrain-bench --example judge_probe -- RUN_DIR FEATURES.jsonl
//! ```
//! RUN_DIR is a training run's folder or its snapshot in `results/` (`config.json`,
//! `episodes.jsonl[.gz]`, `heldout/update-*/trace.jsonl[.gz]`). FEATURES caches h per prompt:
//! a killed probe resumes there, and a second arm reuses what the first computed.
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use onebrain_model::{Brain, ModelConfig};
use sha2::{Digest, Sha256};

/// Prompts prefilled together: one domain's prompts share ~800 tokens of system text.
const BATCH: usize = 4;
/// L2 weights tried by cross-validation (on standardized features).
const LAMBDAS: [f64; 6] = [0.1, 1.0, 10.0, 100.0, 1_000.0, 10_000.0];
const FOLDS: usize = 5;

/// One Judge example: the prompt the Judge scored, whether the first spec solved, and (held-out
/// only) the arm's own score.
struct Example {
    update: u32,
    prompt: String,
    label: bool,
    arm_score: Option<f64>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(run), Some(cache)) = (args.get(1).map(PathBuf::from), args.get(2).map(PathBuf::from)) else {
        eprintln!("usage: judge_probe RUN_DIR FEATURES.jsonl");
        std::process::exit(2);
    };
    let stream = read_examples(&first_of(&run, "episodes.jsonl"), true);
    let mut heldout: Vec<(u32, Vec<Example>)> = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(run.join("heldout")).expect("RUN_DIR/heldout").map(|e| e.unwrap().path()).collect();
    dirs.sort();
    for d in dirs {
        let u: u32 = d.file_name().unwrap().to_string_lossy().trim_start_matches("update-").parse().expect("heldout/update-N");
        heldout.push((u, read_examples(&first_of(&d, "trace.jsonl"), false)));
    }
    eprintln!("{} training examples, held-out evaluations at {:?}", stream.len(), heldout.iter().map(|h| h.0).collect::<Vec<_>>());

    let features = features(&run, &cache, stream.iter().chain(heldout.iter().flat_map(|h| &h.1)));
    let h = |e: &Example| features[&key(&e.prompt)].as_slice();

    println!("| held-out update | stream examples (solved) | arm's Judge AUC / ECE | probe AUC / ECE | probe λ |");
    println!("|---:|---:|---:|---:|---:|");
    for (u, cands) in &heldout {
        // An episode's `update` is 0-based: the evaluation after u updates follows training on
        // the episodes of updates 0..u.
        let train: Vec<&Example> = stream.iter().filter(|e| e.update < *u).collect();
        let arm: Vec<(f64, bool)> = cands.iter().filter_map(|e| e.arm_score.map(|s| (s, e.label))).collect();
        let arm_cell = auc_ece(&arm);
        let (probe_cell, lambda) = if train.iter().any(|e| e.label) && train.iter().any(|e| !e.label) {
            let x: Vec<&[f32]> = train.iter().map(|e| h(e)).collect();
            let y: Vec<bool> = train.iter().map(|e| e.label).collect();
            let lambda = choose_lambda(&x, &y);
            let head = Head::fit(&x, &y, lambda);
            let scored: Vec<(f64, bool)> = cands.iter().map(|e| (head.score(h(e)), e.label)).collect();
            (auc_ece(&scored), format!("{lambda}"))
        } else {
            ("–".into(), "–".into())
        };
        let solved = train.iter().filter(|e| e.label).count();
        println!("| {u} | {} ({solved}) | {arm_cell} | {probe_cell} | {lambda} |", train.len());
    }
}

/// `dir/name`, or `dir/name.gz` where only that exists.
fn first_of(dir: &Path, name: &str) -> PathBuf {
    let plain = dir.join(name);
    if plain.exists() {
        plain
    } else {
        dir.join(format!("{name}.gz"))
    }
}

/// The Judge examples of a training run's episode log (`stream`: lines `{update, record}`) or
/// of a held-out trace (lines are records). An episode the Judge did not score has none, as in
/// the trainer's batch.
fn read_examples(path: &Path, stream: bool) -> Vec<Example> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader: Box<dyn Read> = match path.extension().is_some_and(|e| e == "gz") {
        true => Box::new(flate2::read::GzDecoder::new(file)),
        false => Box::new(file),
    };
    let mut out = Vec::new();
    for line in BufReader::new(reader).lines() {
        let line = line.unwrap();
        // A torn last line (a killed run) holds no example.
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        let (update, rec) = match stream {
            true => (v["update"].as_u64().unwrap_or(0) as u32, &v["record"]),
            false => (0, &v),
        };
        let prompt = rec["steps"].as_array().and_then(|s| s.iter().find_map(|s| s["judge_prompt"].as_str()));
        let (Some(prompt), Some(score)) = (prompt, rec["judge_score"].as_f64()) else { continue };
        out.push(Example {
            update,
            prompt: prompt.to_string(),
            label: rec["b0"].as_bool().unwrap_or(false),
            arm_score: (!stream).then_some(score),
        });
    }
    out
}

fn key(prompt: &str) -> String {
    hex::encode(Sha256::digest(prompt.as_bytes()))
}

/// h for every prompt of `examples`, from the cache where it has them; the rest are computed
/// with the run's model and appended to the cache batch by batch.
fn features<'a>(run: &Path, cache: &Path, examples: impl Iterator<Item = &'a Example>) -> HashMap<String, Vec<f32>> {
    let mut have: HashMap<String, Vec<f32>> = HashMap::new();
    if let Ok(f) = std::fs::File::open(cache) {
        for line in BufReader::new(f).lines() {
            let Ok(v) = serde_json::from_str::<(String, Vec<f32>)>(&line.unwrap()) else { continue };
            have.insert(v.0, v.1);
        }
    }
    let mut todo: Vec<&str> = examples.map(|e| e.prompt.as_str()).filter(|p| !have.contains_key(&key(p))).collect();
    todo.sort_unstable();
    todo.dedup();
    if todo.is_empty() {
        return have;
    }
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("config.json")).expect("RUN_DIR/config.json")).unwrap();
    let cfg: ModelConfig = serde_json::from_value(config["model"].clone()).expect("config.json's model section");
    let mut brain = Brain::load(&cfg).unwrap();
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(cache).unwrap();
    let (start, total) = (Instant::now(), todo.len());
    // Sorted, so a batch's prompts share their domain's system text and the prefill shares it.
    for (i, batch) in todo.chunks(BATCH).enumerate() {
        let tokens: Vec<Vec<u32>> = batch.iter().map(|p| brain.encode(p).unwrap()).collect();
        let hs = brain.judge_features(&tokens).unwrap();
        for (p, h) in batch.iter().zip(hs) {
            writeln!(out, "{}", serde_json::to_string(&(key(p), &h)).unwrap()).unwrap();
            have.insert(key(p), h);
        }
        out.flush().unwrap();
        let done = ((i + 1) * BATCH).min(total);
        eprintln!("features {done}/{total}, {:.0} s", start.elapsed().as_secs_f64());
    }
    have
}

/// "AUC / ECE" of (score, solved) pairs.
fn auc_ece(pairs: &[(f64, bool)]) -> String {
    let (s, l): (Vec<f64>, Vec<bool>) = pairs.iter().copied().unzip();
    let auc = onebrain_eval::roc_auc(&s, &l).map_or("–".into(), |a| format!("{a:.2}"));
    let ece = onebrain_train::calibration_error(pairs).map_or("–".into(), |e| format!("{e:.2}"));
    format!("{auc} / {ece} (n = {})", pairs.len())
}

/// The λ of [`LAMBDAS`] with the least cross-validated log-loss (folds by position, the stream
/// being in update order, so a fold is a stretch of training).
fn choose_lambda(x: &[&[f32]], y: &[bool]) -> f64 {
    let n = x.len();
    let mut best = (f64::INFINITY, LAMBDAS[0]);
    for &lambda in &LAMBDAS {
        let mut loss = 0.0;
        for f in 0..FOLDS {
            let held = |i: usize| i * FOLDS / n == f;
            let (xt, yt): (Vec<&[f32]>, Vec<bool>) = (0..n).filter(|&i| !held(i)).map(|i| (x[i], y[i])).unzip();
            if !yt.iter().any(|&b| b) || yt.iter().all(|&b| b) {
                continue;
            }
            let head = Head::fit(&xt, &yt, lambda);
            for i in (0..n).filter(|&i| held(i)) {
                let p = head.score(x[i]).clamp(1e-6, 1.0 - 1e-6);
                loss -= if y[i] { p.ln() } else { (1.0 - p).ln() };
            }
        }
        if loss < best.0 {
            best = (loss, lambda);
        }
    }
    best.1
}

/// A logistic-regression head on standardized features: σ(w·z + b), z = (h − μ) / σ.
struct Head {
    mean: Vec<f64>,
    scale: Vec<f64>,
    w: Vec<f64>,
    b: f64,
}

impl Head {
    /// Minimizes [`objective`] (summed log-loss plus λ/2·|w|², the bias unpenalized) by
    /// Newton's method with backtracking, each step solved by conjugate gradients.
    fn fit(x: &[&[f32]], y: &[bool], lambda: f64) -> Head {
        let (n, d) = (x.len(), x[0].len());
        let mut mean = vec![0.0; d];
        for h in x {
            for (m, &v) in mean.iter_mut().zip(*h) {
                *m += f64::from(v) / n as f64;
            }
        }
        let mut scale = vec![0.0; d];
        for h in x {
            for ((s, &v), m) in scale.iter_mut().zip(*h).zip(&mean) {
                *s += (f64::from(v) - m).powi(2) / n as f64;
            }
        }
        scale.iter_mut().for_each(|s| *s = s.sqrt().max(1e-6));
        let z: Vec<Vec<f64>> = x.iter().map(|h| h.iter().zip(&mean).zip(&scale).map(|((&v, m), s)| (f64::from(v) - m) / s).collect()).collect();
        // Parameters θ = (w, b), b last.
        let mut theta = vec![0.0; d + 1];
        for _ in 0..100 {
            let mut grad = vec![0.0; d + 1];
            let mut weights = Vec::with_capacity(n);
            for (zi, &yi) in z.iter().zip(y) {
                let p = sigmoid(dot(&theta[..d], zi) + theta[d]);
                let g = p - f64::from(u8::from(yi));
                grad[..d].iter_mut().zip(zi).for_each(|(gj, zj)| *gj += g * zj);
                grad[d] += g;
                weights.push(p * (1.0 - p));
            }
            grad[..d].iter_mut().zip(&theta[..d]).for_each(|(g, t)| *g += lambda * t);
            // The Newton step H⁻¹·g by conjugate gradients on Hessian-vector products, each
            // O(n·d): forming H would be O(n·d²) a step.
            let step = conjugate_gradients(&grad, |v| {
                let mut out = vec![0.0; d + 1];
                for (zi, w) in z.iter().zip(&weights) {
                    let t = w * (dot(&v[..d], zi) + v[d]);
                    out[..d].iter_mut().zip(zi).for_each(|(o, zj)| *o += t * zj);
                    out[d] += t;
                }
                out[..d].iter_mut().zip(&v[..d]).for_each(|(o, vj)| *o += lambda * vj);
                out[d] += 1e-9 * v[d];
                out
            });
            // Backtracking: a full Newton step can overshoot where the classes nearly separate.
            let before = objective(&theta, &z, y, lambda);
            let mut t = 1.0;
            let moved = loop {
                let next: Vec<f64> = theta.iter().zip(&step).map(|(th, s)| th - t * s).collect();
                if objective(&next, &z, y, lambda) <= before || t < 1e-6 {
                    break next;
                }
                t *= 0.5;
            };
            let size = t * dot(&step, &step).sqrt();
            theta = moved;
            if size < 1e-8 {
                break;
            }
        }
        Head { mean, scale, b: theta[d], w: theta[..d].to_vec() }
    }

    /// σ(w·z + b) of one feature vector.
    fn score(&self, h: &[f32]) -> f64 {
        let z = h.iter().zip(&self.mean).zip(&self.scale).zip(&self.w).map(|(((&v, m), s), w)| (f64::from(v) - m) / s * w).sum::<f64>();
        sigmoid(z + self.b)
    }
}

/// Σ log-loss + λ/2·|w|² at θ = (w, b).
fn objective(theta: &[f64], z: &[Vec<f64>], y: &[bool], lambda: f64) -> f64 {
    let d = theta.len() - 1;
    let data: f64 = z
        .iter()
        .zip(y)
        .map(|(zi, &yi)| {
            let s = dot(&theta[..d], zi) + theta[d];
            // log(1 + e^s) − y·s, stable for either sign of s.
            s.max(0.0) + (-s.abs()).exp().ln_1p() - if yi { s } else { 0.0 }
        })
        .sum();
    data + lambda / 2.0 * dot(&theta[..d], &theta[..d])
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Solves H·x = g by conjugate gradients, H symmetric positive definite and given by its
/// products `hv(v)` = H·v.
fn conjugate_gradients(g: &[f64], hv: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let mut x = vec![0.0; g.len()];
    let mut r = g.to_vec();
    let mut p = r.clone();
    let mut rs = dot(&r, &r);
    let stop = 1e-20 * rs;
    for _ in 0..4 * g.len() {
        if rs <= stop {
            break;
        }
        let hp = hv(&p);
        let alpha = rs / dot(&p, &hp);
        x.iter_mut().zip(&p).for_each(|(xi, pi)| *xi += alpha * pi);
        r.iter_mut().zip(&hp).for_each(|(ri, hi)| *ri -= alpha * hi);
        let next = dot(&r, &r);
        p.iter_mut().zip(&r).for_each(|(pi, ri)| *pi = ri + next / rs * *pi);
        rs = next;
    }
    x
}
