//! Generation: batched decoding after [`super::prefill`], constrained sampling, the Judge's score.

use std::{collections::VecDeque, sync::Mutex};

use onebrain_grammar::GrammarError;

use crate::budget::{MemoryEstimate, DEFAULT_MEMORY_BUDGET_MIB};

use super::prefill::{distinct_prompts, shared_keys, SameFront};
use super::*;

/// Why generation of a sequence ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The model emitted an end-of-turn token (not included in the output).
    Eos,
    /// The text reached one of the stop strings (cut off from the output).
    StopString(String),
    /// `max_tokens` tokens were generated.
    MaxTokens,
    /// The context window is full.
    ContextFull,
    /// The constraint's grammar is complete: nothing may follow.
    Complete,
}

/// One generated sequence with its statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// The generated text, without the stop string or end token.
    pub text: String,
    /// The generated token ids (the end token excluded).
    pub tokens: Vec<u32>,
    /// Prompt length in tokens (role tokens not counted).
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys/values came from the prefix cache.
    pub cached_prompt_tokens: usize,
    /// Positions the prefill actually computed for the whole call (role tokens and
    /// every row's uncached part; a prefix shared by the rows of a batch counts once).
    pub prefill_tokens: usize,
    /// Seconds from the call until the first token's logits (shared by a batch).
    pub prefill_secs: f64,
    /// Seconds spent decoding this sequence after the prefill.
    pub decode_secs: f64,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// log π(token | prefix) of each generated token under the distribution it was sampled
    /// from: log softmax(masked logits / T)[token], T the row's sampling temperature (1 when
    /// greedy), the masked logits renormalised over the tokens the constraint allowed; 0 for
    /// tokens the grammar forced. Computed in f64 from the sampler's own logits. The
    /// learner does not take them as PPO's π_old: its own forward differs from them by about
    /// 4e-2 per token (`losses/sampler_gap`). With `top_p < 1` the value
    /// ignores the nucleus cut (it is the whole tempered distribution's, not the truncated one
    /// that was drawn from).
    #[serde(default)]
    pub logprobs: Vec<f32>,
    /// The constraint's counters, when one applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<ConstraintStats>,
}

impl Generation {
    /// Prefill throughput of the call, in positions per second.
    pub fn prefill_tokens_per_sec(&self) -> f64 {
        rate(self.prefill_tokens, self.prefill_secs)
    }

    /// Decode throughput of this sequence, in tokens per second.
    pub fn decode_tokens_per_sec(&self) -> f64 {
        rate(self.tokens.len(), self.decode_secs)
    }
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}


impl Brain {
    // ---------------------------------------------------------------- generation

    /// Generates a continuation of `prompt` (usually from [`Brain::chat_prompt`]) in `role`.
    pub fn generate(&mut self, role: Role, prompt: &str, s: &SamplingConfig) -> Result<Generation> {
        let tokens = self.tokenizer.encode(prompt)?;
        let mut out = self.generate_rows(role, &[tokens], std::slice::from_ref(s))?;
        Ok(out.remove(0))
    }

    /// Generates one continuation per prompt, decoding the rows together. Rows sample
    /// with seeds `s.seed + i`; a prefix common to all prompts is computed once.
    pub fn generate_batch(
        &mut self,
        role: Role,
        prompts: &[String],
        s: &SamplingConfig,
    ) -> Result<Vec<Generation>> {
        let tokens = prompts.iter().map(|p| self.tokenizer.encode(p)).collect::<Result<Vec<_>>>()?;
        self.generate_tokens(role, &tokens, s)
    }

    /// [`Brain::generate_batch`] on token ids: [`Brain::generate_rows`] with `s` for every
    /// row and seed `s.seed + i` for row `i`.
    pub fn generate_tokens(
        &mut self,
        role: Role,
        prompts: &[Vec<u32>],
        s: &SamplingConfig,
    ) -> Result<Vec<Generation>> {
        let rows: Vec<SamplingConfig> = (0..prompts.len())
            .map(|i| SamplingConfig { seed: s.seed.wrapping_add(i as u64), ..s.clone() })
            .collect();
        self.generate_rows(role, prompts, &rows)
    }

    /// Generates one continuation per prompt, row `i` sampled as `samplings[i]` says (its
    /// seed, temperature, top-p, token cap, stop strings and constraint, built for it alone),
    /// decoding the rows together: identical prompts are prefilled once, and a prefix common
    /// to all prompts once. On the CPU a row's arithmetic is its own: every
    /// product works row by row, attention counts its blocks over the keys a row sees (its
    /// padding left out), a prompt's positions attend through one kernel however the prefill
    /// is cut into heads, tails and chunks, and decoded ones through another however many a
    /// pass feeds. So a row gives its batch-1 output bit for bit whatever rows, padding and
    /// prefix cache share its call (`host/model/tests/batched_rows.rs`); elsewhere
    /// (CUDA, bf16 activations) only up to rounding. Any row's error fails the call; see
    /// [`Brain::generate_rows_each`].
    pub fn generate_rows(
        &mut self,
        role: Role,
        prompts: &[Vec<u32>],
        samplings: &[SamplingConfig],
    ) -> Result<Vec<Generation>> {
        self.generate_rows_each(role, prompts, samplings)?.into_iter().collect()
    }

    /// [`Brain::generate_rows`], where an error of one row's own (its constraint failed to
    /// build, to mask or to accept a token; its tokens failed to decode) ends that row alone,
    /// as the inner `Err`. The outer `Err` is the call's: a bad sampling config or prompt
    /// (see [`Brain::check_prompt`]), a failed forward.
    pub fn generate_rows_each(
        &mut self,
        role: Role,
        prompts: &[Vec<u32>],
        samplings: &[SamplingConfig],
    ) -> Result<Vec<Result<Generation>>> {
        if samplings.len() != prompts.len() {
            return Err(Error::InvalidConfig(format!(
                "{} prompts but {} sampling configs",
                prompts.len(),
                samplings.len()
            )));
        }
        for s in samplings {
            s.validate()?;
        }
        if prompts.is_empty() {
            return Ok(Vec::new());
        }
        let b = prompts.len();
        let start = Instant::now();
        let (distinct, of_row) = distinct_prompts(prompts);
        let max_new = samplings.iter().map(|s| s.max_tokens).max().unwrap_or(0);
        let mut pre = self.prefill(role, &distinct, b, max_new)?;
        if distinct.len() < b {
            pre = pre.rows(&of_row)?;
        }
        let prefill_secs = start.elapsed().as_secs_f64();
        let backbone = self.gen_backbone(role).clone();
        let view = self.role_params(role).view(self.scale, true)?;
        let mut logits = backbone.row_logits(&pre.last_hidden)?.to_dtype(DType::F32)?.to_vec2::<f32>()?;

        // Each row's finished output (or its own error), its constraint and its sampler.
        let mut outs: Vec<Option<Result<Generation>>> = (0..b).map(|_| None).collect();
        let env = match samplings.iter().any(|s| s.constraint.is_some()) {
            true => Some(self.token_env()?),
            false => None,
        };
        let mut constraints: Vec<Option<Box<dyn TokenConstraint>>> = Vec::with_capacity(b);
        for (row, s) in samplings.iter().enumerate() {
            constraints.push(match (&s.constraint, &env) {
                (Some(spec), Some(env)) => match spec.build(env, s.max_tokens) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        outs[row] = Some(Err(e.into()));
                        None
                    }
                },
                _ => None,
            });
        }
        let mut samplers: Vec<Sampler> =
            samplings.iter().map(|s| Sampler::new(s.seed, s.temperature, s.top_p)).collect();
        let mut logps: Vec<Vec<f32>> = vec![Vec::new(); b];
        let mut toks: Vec<Vec<u32>> = vec![Vec::new(); b];
        let mut texts: Vec<String> = vec![String::new(); b];
        // Forced tokens a row has accepted but not yet fed to the model (batch > 1 feeds one
        // token per row per step).
        let mut pending: Vec<VecDeque<u32>> = vec![VecDeque::new(); b];
        // Rows still decoding, as indices into the prompts (ascending).
        let mut active: Vec<usize> = (0..b).collect();
        let mut kv = pre.kv;
        let mut next_pos = pre.next_pos;
        let mut pads = pre.pads;
        let mut pad_start = pre.pad_start;
        let mut fronts = pre.fronts;
        let cached = pre.cached;
        let eos = self.tokenizer.eos_ids().to_vec();
        let decode_start = Instant::now();
        let max_positions = backbone.max_positions();
        let stats = |row: usize, toks: Vec<u32>, text: String, reason: StopReason, logprobs: Vec<f32>, constraint: Option<ConstraintStats>| Generation {
            text,
            tokens: toks,
            logprobs,
            constraint,
            prompt_tokens: prompts[row].len(),
            cached_prompt_tokens: cached[row],
            prefill_tokens: pre.computed,
            prefill_secs,
            decode_secs: decode_start.elapsed().as_secs_f64(),
            stop_reason: reason,
        };

        loop {
            // 1. The rows with no forced token left to feed sample one token each, under
            // their constraint's mask (the masks computed in parallel).
            let mut drawing: Vec<usize> = (0..active.len())
                .filter(|&slot| outs[active[slot]].is_none() && pending[active[slot]].is_empty())
                .collect();
            let mut masked: Vec<(usize, &mut [f32], &mut dyn TokenConstraint)> = Vec::new();
            let mut rows_c = constraints.iter_mut().enumerate();
            for (slot, l) in logits.iter_mut().enumerate() {
                if drawing.contains(&slot) {
                    let row = active[slot];
                    let (_, c) = rows_c.find(|(r, _)| *r == row).expect("active rows are ascending");
                    if let Some(c) = c.as_deref_mut() {
                        masked.push((slot, l.as_mut_slice(), c));
                    }
                }
            }
            let masked_slots: Vec<usize> = masked.iter().map(|m| m.0).collect();
            let results = mask_rows(masked.into_iter().map(|(_, l, c)| (l, c)).collect());
            for (slot, r) in masked_slots.into_iter().zip(results) {
                if let Err(e) = r {
                    outs[active[slot]] = Some(Err(e.into()));
                    drawing.retain(|&s| s != slot);
                }
            }
            let rows: Vec<usize> = drawing.iter().map(|&slot| active[slot]).collect();
            let drawn: Vec<Vec<f32>> = drawing.iter().map(|&slot| std::mem::take(&mut logits[slot])).collect();
            let mut picks = drawing.iter().copied().zip(sample_rows(&drawn, &rows, &mut samplers));

            // 2. Each row's next input: a forced token it accepted earlier, or the token it
            // drew (with the tokens the grammar forces after it); retire the finished rows.
            let mut next: Vec<Vec<u32>> = Vec::with_capacity(active.len());
            let mut keep = Vec::with_capacity(active.len());
            for (slot, &row) in active.iter().enumerate() {
                if outs[row].is_some() {
                    continue; // failed on its own
                }
                if let Some(f) = pending[row].pop_front() {
                    keep.push(slot as u32);
                    next.push(vec![f]);
                    continue;
                }
                let (at, (tok, logp)) = picks.next().expect("every row without forced tokens drew");
                debug_assert_eq!(at, slot);
                let s = &samplings[row];
                let mut done = None;
                if !s.ignore_eos && eos.contains(&tok) {
                    done = Some(StopReason::Eos);
                } else {
                    toks[row].push(tok);
                    logps[row].push(logp);
                    if let Some(c) = constraints[row].as_mut() {
                        let mut accept = || -> Result<()> {
                            c.consume(tok)?;
                            // Forced tokens skip sampling (never past `max_tokens`).
                            let room = s.max_tokens.saturating_sub(toks[row].len());
                            for f in c.forced().into_iter().take(room) {
                                c.consume(f)?;
                                toks[row].push(f);
                                logps[row].push(0.0);
                                pending[row].push_back(f);
                            }
                            Ok(())
                        };
                        if let Err(e) = accept() {
                            outs[row] = Some(Err(e));
                            continue;
                        }
                    }
                    match self.tokenizer.decode(&toks[row]) {
                        Ok(t) => texts[row] = t,
                        Err(e) => {
                            outs[row] = Some(Err(e));
                            continue;
                        }
                    }
                    if let Some((at, stop)) = first_stop(&texts[row], &s.stop) {
                        texts[row].truncate(at);
                        done = Some(StopReason::StopString(stop));
                    } else if constraints[row].as_ref().is_some_and(|c| c.finished()) {
                        done = Some(StopReason::Complete);
                    } else if toks[row].len() >= s.max_tokens {
                        done = Some(StopReason::MaxTokens);
                    } else if next_pos[slot] as usize + 1 + pending[row].len() > max_positions {
                        done = Some(StopReason::ContextFull);
                    }
                }
                match done {
                    Some(reason) => {
                        pending[row].clear();
                        let cstats = constraints[row].as_ref().map(|c| c.stats());
                        outs[row] = Some(Ok(stats(
                            row,
                            std::mem::take(&mut toks[row]),
                            std::mem::take(&mut texts[row]),
                            reason,
                            std::mem::take(&mut logps[row]),
                            cstats,
                        )));
                    }
                    None => {
                        keep.push(slot as u32);
                        next.push(vec![tok]);
                    }
                }
            }
            if keep.is_empty() {
                break;
            }
            if keep.len() < active.len() {
                kv = kv.select_rows(&keep)?;
                active = keep.iter().map(|&k| active[k as usize]).collect();
                next_pos = keep.iter().map(|&k| next_pos[k as usize]).collect();
                pads = keep.iter().map(|&k| pads[k as usize]).collect();
                pad_start = keep.iter().map(|&k| pad_start[k as usize]).collect();
                fronts = keep.iter().map(|&k| fronts[k as usize]).collect();
            }
            // 3. One forward: a token per row, or, for a row decoding alone, every forced
            // token it has yet to feed in the same pass.
            if active.len() == 1 {
                next[0].extend(pending[active[0]].drain(..));
            }
            let n = active.len();
            let fed = next[0].len();
            let flat: Vec<u32> = next.concat();
            let ids = Tensor::from_vec(flat, (n, fed), self.device())?;
            let x = backbone.embed(&ids)?;
            let step = decode_step(&next_pos, &pads, &pad_start, &fronts, kv.len, fed, self.device())?;
            let hidden = backbone.forward(&x, &step, Some(&mut kv), &view, Mode::Fast)?;
            logits = backbone
                .row_logits(&hidden.narrow(1, fed - 1, 1)?.squeeze(1)?)?
                .to_dtype(DType::F32)?
                .to_vec2::<f32>()?;
            for p in next_pos.iter_mut() {
                *p += fed as u32;
            }
        }
        Ok(outs.into_iter().map(|o| o.expect("every row finished")).collect())
    }

    /// Scores `prompt` (task and candidate, from the Judge's template) with
    /// s_J = σ(w·h + b) ∈ (0, 1), h the final hidden state of the last token.
    pub fn judge(&mut self, prompt: &str) -> Result<f32> {
        let mut out = self.judge_batch(std::slice::from_ref(&prompt.to_string()))?;
        Ok(out.remove(0))
    }

    /// [`Brain::judge`] of each prompt, the prompts prefilled together (a prefix common to
    /// all of them, such as the task, once); the scores equal the one-at-a-time ones up to
    /// the rounding of the batched kernels.
    pub fn judge_batch(&mut self, prompts: &[String]) -> Result<Vec<f32>> {
        let tokens = prompts.iter().map(|p| self.tokenizer.encode(p)).collect::<Result<Vec<_>>>()?;
        self.judge_tokens(&tokens)
    }

    /// [`Brain::judge_batch`] on token ids.
    pub fn judge_tokens(&mut self, prompts: &[Vec<u32>]) -> Result<Vec<f32>> {
        if prompts.is_empty() {
            return Ok(Vec::new());
        }
        let (last_hidden, of_row) = self.judge_hidden(prompts)?;
        let w = self.judge_head.w.as_detached_tensor();
        let b = self.judge_head.b.as_detached_tensor();
        let logits = last_hidden.broadcast_mul(&w)?.sum(1)?.broadcast_add(&b)?;
        let logits = logits.to_dtype(DType::F32)?.to_vec1::<f32>()?;
        Ok(of_row.iter().map(|&r| 1.0 / (1.0 + (-logits[r as usize]).exp())).collect())
    }

    /// The final hidden state h of the last token of each prompt in the Judge's role: what
    /// [`Brain::judge_tokens`] scores with w·h + b, for a head fitted elsewhere (a probe of
    /// the Judge's features, `host/train/examples/judge_probe.rs`). Prompts are prefilled
    /// together, as there.
    pub fn judge_features(&mut self, prompts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>> {
        if prompts.is_empty() {
            return Ok(Vec::new());
        }
        let (last_hidden, of_row) = self.judge_hidden(prompts)?;
        let rows = last_hidden.to_dtype(DType::F32)?.to_vec2::<f32>()?;
        Ok(of_row.iter().map(|&r| rows[r as usize].clone()).collect())
    }

    /// The Judge's final hidden states `(distinct prompts, hidden)` of `prompts`, and the row
    /// of each prompt among them. A state computed lately under the same Judge parameters
    /// is reused as it was (the exact one, whatever batch it was prefilled in); the others
    /// are prefilled together, each prompt once, and kept.
    fn judge_hidden(&mut self, prompts: &[Vec<u32>]) -> Result<(Tensor, Vec<u32>)> {
        let (distinct, of_row) = distinct_prompts(prompts);
        let fp = self.fingerprint(Role::Judge)?;
        let missing: Vec<Vec<u32>> =
            distinct.iter().filter(|p| self.judge_states.get(fp, p).is_none()).cloned().collect();
        let mut fresh: HashMap<&[u32], Vec<f32>> = HashMap::new();
        if !missing.is_empty() {
            let pre = self.prefill(Role::Judge, &missing, missing.len(), 0)?;
            let rows = pre.last_hidden.to_dtype(DType::F32)?.to_vec2::<f32>()?;
            fresh.extend(missing.iter().map(Vec::as_slice).zip(rows));
        }
        let hidden = self.base.cfg.hidden_size;
        let mut flat = Vec::with_capacity(distinct.len() * hidden);
        for p in &distinct {
            let state = match fresh.get(p.as_slice()) {
                Some(h) => h,
                None => self.judge_states.get(fp, p).expect("kept: looked up above"),
            };
            flat.extend_from_slice(state);
        }
        for (p, h) in fresh {
            self.judge_states.insert(fp, p.to_vec(), h);
        }
        Ok((Tensor::from_vec(flat, (distinct.len(), hidden), self.device())?, of_row))
    }

    /// The checks every prompt passes before a forward (not empty, ids inside the
    /// vocabulary, room for at least one new token in the context). A failing row fails a
    /// whole [`Brain::generate_rows`] or [`Brain::judge_batch`] call, so a caller that
    /// batches others' requests runs this first to fail such a row alone.
    pub fn check_prompt(&self, tokens: &[u32]) -> Result<()> {
        if tokens.is_empty() {
            return Err(Error::EmptyInput("prompt has no tokens"));
        }
        self.check_tokens(tokens)?;
        let (n_soft, max_positions) = (self.cfg.role_tokens, self.context_len());
        if n_soft + tokens.len() >= max_positions {
            return Err(Error::ContextOverflow { tokens: n_soft + tokens.len(), max_new: 1, context: max_positions });
        }
        Ok(())
    }

    /// What a request of `rows` rows of `positions` positions each (role tokens, prompt and
    /// the tokens to generate) is estimated to hold resident, with this model.
    pub fn memory_estimate(&self, rows: usize, positions: usize) -> MemoryEstimate {
        MemoryEstimate::of(&self.base.cfg, self.model_bytes, rows, positions)
    }

    /// The memory budget a request must fit, MiB (`memory-budget-mb` in the config).
    pub fn memory_budget_mib(&self) -> usize {
        self.cfg.memory_budget_mb.unwrap_or(DEFAULT_MEMORY_BUDGET_MIB)
    }

    /// Logits of the next token after each row of `prompts`, from the generation path
    /// (quantized weights, fused kernels, prefix cache, batching), e.g. to score choices.
    pub fn next_token_logits(&mut self, role: Role, prompts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>> {
        let pre = self.prefill(role, prompts, prompts.len(), 0)?;
        let backbone = self.gen_backbone(role);
        Ok(backbone.row_logits(&pre.last_hidden)?.to_vec2::<f32>()?)
    }
}



/// Mask and positions for one decode step of `n` rows feeding `q` tokens each (`q > 1` only
/// for a row decoding alone): each row's left padding is hidden, and the new tokens see each
/// other causally. Rows of one class of `fronts` read their common front once.
fn decode_step(next_pos: &[u32], pads: &[usize], pad_start: &[usize], fronts: &[SameFront], past: usize, q: usize, dev: &Device) -> Result<Step> {
    if pads.iter().all(|&p| p == 0) {
        // Every row is at the same position with nothing to hide: plain causal.
        return Ok(Step { shared_keys: shared_keys(fronts), ..Step::decode() });
    }
    let n = next_pos.len();
    let kv = past + q;
    let mut mask = vec![0f32; n * q * kv];
    let mut positions = Vec::with_capacity(n * q);
    for (r, &np) in pads.iter().enumerate() {
        for i in 0..q {
            positions.push(next_pos[r] + i as u32);
            let row = &mut mask[(r * q + i) * kv..][..kv];
            row[pad_start[r]..pad_start[r] + np].fill(MASKED);
            row[past + i + 1..].fill(MASKED);
        }
    }
    // The mask hides each row's padding and, among the new tokens, what is causally ahead.
    let hidden = Some(pad_start.iter().zip(pads).map(|(&s, &n)| (s, n)).collect());
    Ok(Step {
        positions: Some(positions),
        mask: Some(Tensor::from_vec(mask, (n, 1, 1, q, kv), dev)?),
        hidden,
        constant_keys: (0, 0),
        decode: true,
        shared_keys: shared_keys(fronts),
    })
}

/// Masks each row's logits with its constraint's allowed set ([`TokenConstraint::allowed`],
/// then [`apply_mask`]), the rows spread over the compute pool: a mask takes 1–3 ms on
/// Qwen's 151,936-token vocabulary (`onebrain bench constraint`), which a batch of 16 rows
/// would otherwise spend one after the other on one core. Each row's mask depends on its
/// constraint alone, so the result does not depend on the spread.
fn mask_rows(rows: Vec<(&mut [f32], &mut dyn TokenConstraint)>) -> Vec<Result<(), GrammarError>> {
    let one = |logits: &mut [f32], c: &mut dyn TokenConstraint| c.allowed().map(|m| apply_mask(logits, &m));
    if rows.len() <= 1 {
        return rows.into_iter().map(|(l, c)| one(l, c)).collect();
    }
    let jobs: Vec<Mutex<(&mut [f32], &mut dyn TokenConstraint, Option<Result<(), GrammarError>>)>> =
        rows.into_iter().map(|(l, c)| Mutex::new((l, c, None))).collect();
    onebrain_kernels::pool::execute_chunked(jobs.len(), |range| {
        for j in range {
            let mut job = jobs[j].lock().expect("a row is masked by one thread");
            let (logits, c, out) = &mut *job;
            *out = Some(one(logits, *c));
        }
    });
    jobs.into_iter()
        .map(|j| j.into_inner().expect("no thread panicked").2.expect("every row was masked"))
        .collect()
}

/// The earliest stop string in `text`: (byte offset, the string).
fn first_stop(text: &str, stops: &[String]) -> Option<(usize, String)> {
    stops
        .iter()
        .filter_map(|s| text.find(s.as_str()).map(|at| (at, s.clone())))
        .min_by_key(|(at, _)| *at)
}
