//! Generation: prefill with prefix reuse, batched decoding, constrained sampling, the Judge's score.

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
    /// log π(token | prefix) of each generated token at temperature 1, under the constrained
    /// (masked and renormalised) distribution when a constraint applied; 0 for tokens the
    /// grammar forced.
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

/// The state after prefilling a batch: caches, per-row positions and last hidden states.
struct Prefilled {
    kv: KvCache,
    /// `(b, hidden)` final hidden state of each row's last prompt token.
    last_hidden: Tensor,
    /// Per row, the RoPE position of the next token.
    next_pos: Vec<u32>,
    /// Per row, the cache slots `[pad_start, pad_start + pads)` that hold left padding.
    pads: Vec<usize>,
    pad_start: usize,
    cached: usize,
    computed: usize,
}

impl Brain {
    // ---------------------------------------------------------------- generation

    /// Generates a continuation of `prompt` (usually from [`Brain::chat_prompt`]) in `role`.
    pub fn generate(&mut self, role: Role, prompt: &str, s: &SamplingConfig) -> Result<Generation> {
        let tokens = self.tokenizer.encode(prompt)?;
        let mut out = self.generate_tokens(role, &[tokens], s)?;
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

    /// [`Brain::generate_batch`] on token ids.
    pub fn generate_tokens(
        &mut self,
        role: Role,
        prompts: &[Vec<u32>],
        s: &SamplingConfig,
    ) -> Result<Vec<Generation>> {
        s.validate()?;
        if prompts.is_empty() {
            return Ok(Vec::new());
        }
        let start = Instant::now();
        let pre = self.prefill(role, prompts)?;
        let prefill_secs = start.elapsed().as_secs_f64();
        let backbone = self.gen_backbone(role).clone();
        let view = self.role_params(role).view(self.scale, true)?;
        let b = prompts.len();
        let logits = backbone.logits(&pre.last_hidden)?.to_dtype(DType::F32)?.to_vec2::<f32>()?;

        let mut constraints: Vec<Option<Box<dyn TokenConstraint>>> = match &s.constraint {
            Some(spec) => {
                let env = self.token_env()?;
                (0..b).map(|_| spec.build(&env, s.max_tokens).map(Some)).collect::<std::result::Result<_, _>>()?
            }
            None => (0..b).map(|_| None).collect(),
        };
        let mut logps: Vec<Vec<f32>> = vec![Vec::new(); b];
        let mut samplers: Vec<Sampler> = (0..b)
            .map(|i| Sampler::new(s.seed.wrapping_add(i as u64), s.temperature, s.top_p))
            .collect();
        let mut outs: Vec<Option<Generation>> = vec![None; b];
        let mut toks: Vec<Vec<u32>> = vec![Vec::new(); b];
        let mut texts: Vec<String> = vec![String::new(); b];
        // Rows still decoding, as indices into the prompts.
        let mut active: Vec<usize> = (0..b).collect();
        let mut kv = pre.kv;
        let mut next_pos = pre.next_pos;
        let mut pads = pre.pads;
        let pad_start = pre.pad_start;
        let mut logits = logits;
        let decode_start = Instant::now();
        let max_positions = backbone.max_positions();
        let stats = |row: usize, toks: Vec<u32>, text: String, reason: StopReason, logprobs: Vec<f32>, constraint: Option<ConstraintStats>| Generation {
            text,
            tokens: toks,
            logprobs,
            constraint,
            prompt_tokens: prompts[row].len(),
            cached_prompt_tokens: pre.cached,
            prefill_tokens: pre.computed,
            prefill_secs,
            decode_secs: decode_start.elapsed().as_secs_f64(),
            stop_reason: reason,
        };

        loop {
            // Sample one token per active row (plus, at batch 1, the tokens the grammar forces
            // after it) and retire the finished rows.
            let mut next: Vec<Vec<u32>> = Vec::with_capacity(active.len());
            let mut keep = Vec::with_capacity(active.len());
            for (slot, &row) in active.iter().enumerate() {
                if let Some(c) = constraints[row].as_mut() {
                    apply_mask(&mut logits[slot], &c.allowed()?);
                }
            }
            let picks = sample_rows(&logits, &active, &mut samplers);
            for (slot, &row) in active.iter().enumerate() {
                let (tok, logp) = picks[slot];
                let mut done = None;
                let mut fed = vec![tok];
                if !s.ignore_eos && self.tokenizer.eos_ids().contains(&tok) {
                    done = Some(StopReason::Eos);
                } else {
                    toks[row].push(tok);
                    logps[row].push(logp);
                    if let Some(c) = constraints[row].as_mut() {
                        c.consume(tok)?;
                        if b == 1 {
                            // Forced tokens skip sampling and enter the cache in one pass
                            // (never past `max_tokens`).
                            let room = s.max_tokens.saturating_sub(toks[row].len());
                            for f in c.forced().into_iter().take(room) {
                                c.consume(f)?;
                                toks[row].push(f);
                                logps[row].push(0.0);
                                fed.push(f);
                            }
                        }
                    }
                    texts[row] = self.tokenizer.decode(&toks[row])?;
                    if let Some((at, stop)) = first_stop(&texts[row], &s.stop) {
                        texts[row].truncate(at);
                        done = Some(StopReason::StopString(stop));
                    } else if constraints[row].as_ref().is_some_and(|c| c.finished()) {
                        done = Some(StopReason::Complete);
                    } else if toks[row].len() >= s.max_tokens {
                        done = Some(StopReason::MaxTokens);
                    } else if kv.len + fed.len() > max_positions {
                        done = Some(StopReason::ContextFull);
                    }
                }
                match done {
                    Some(reason) => {
                        let cstats = constraints[row].as_ref().map(|c| c.stats());
                        outs[row] = Some(stats(
                            row,
                            std::mem::take(&mut toks[row]),
                            std::mem::take(&mut texts[row]),
                            reason,
                            std::mem::take(&mut logps[row]),
                            cstats,
                        ));
                    }
                    None => {
                        keep.push(slot as u32);
                        next.push(fed);
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
            }
            let n = active.len();
            let fed = next[0].len();
            let ids = if n == 1 {
                Tensor::new(next[0].as_slice(), self.device())?.unsqueeze(0)?
            } else {
                let flat: Vec<u32> = next.iter().map(|t| t[0]).collect();
                Tensor::from_vec(flat, (n, 1), self.device())?
            };
            let x = backbone.embed(&ids)?;
            let step = decode_step(&next_pos, &pads, pad_start, kv.len, self.device())?;
            let hidden = backbone.forward(&x, &step, Some(&mut kv), &view, Mode::Fast)?;
            logits = backbone.logits(&hidden.narrow(1, fed - 1, 1)?.squeeze(1)?)?.to_vec2::<f32>()?;
            for p in next_pos.iter_mut() {
                *p += fed as u32;
            }
        }
        Ok(outs.into_iter().map(|o| o.expect("every row finished")).collect())
    }

    /// Scores `prompt` (task and candidate, from the Judge's template) with
    /// s_J = σ(w·h + b) ∈ (0, 1), h the final hidden state of the last token.
    pub fn judge(&mut self, prompt: &str) -> Result<f32> {
        let tokens = self.tokenizer.encode(prompt)?;
        let pre = self.prefill(Role::Judge, &[tokens])?;
        let w = self.judge_head.w.as_detached_tensor();
        let b = self.judge_head.b.as_detached_tensor();
        let logit = pre.last_hidden.squeeze(0)?.mul(&w)?.sum_all()?.add(&b.squeeze(0)?)?;
        let logit = logit.to_scalar::<f32>()?;
        Ok(1.0 / (1.0 + (-logit).exp()))
    }

    /// Runs the prompts through the backbone, reusing cached prefixes.
    fn prefill(&mut self, role: Role, prompts: &[Vec<u32>]) -> Result<Prefilled> {
        let n_soft = self.cfg.role_tokens;
        let max_positions = self.context_len();
        for p in prompts {
            if p.is_empty() {
                return Err(Error::EmptyInput("prompt has no tokens"));
            }
            self.check_tokens(p)?;
            if n_soft + p.len() >= max_positions {
                return Err(Error::ContextOverflow { tokens: n_soft + p.len(), max_new: 1, context: max_positions });
            }
        }
        let fp = self.fingerprint(role)?;
        let backbone = self.gen_backbone(role).clone();
        let params = self.role_params(role).clone();
        let view = params.view(self.scale, true)?;
        let soft = params.soft_tokens(true)?;
        let b = prompts.len();

        // The part common to every row, leaving each row at least one own token so that
        // every row gets its own last hidden state.
        let min_len = prompts.iter().map(Vec::len).min().unwrap_or(0);
        let mut shared = prompts.iter().skip(1).fold(prompts[0].len(), |m, p| m.min(common_prefix(&prompts[0], p)));
        shared = shared.min(min_len - 1);
        let head = &prompts[0][..shared];

        let (cached, mut kv) = match self.cache.lookup(role, fp, head, n_soft)? {
            Some((m, kv)) => (m, kv),
            None => (0, KvCache::new(backbone.blocks.len())),
        };
        let mut computed = 0;
        // 1. The shared head (and the soft tokens, if not cached), once, at batch 1.
        if kv.len == 0 || cached < shared {
            let ids = Tensor::new(&head[cached..], self.device())?.unsqueeze(0)?;
            let mut x = if shared > cached { Some(backbone.embed(&ids)?) } else { None };
            if kv.len == 0 {
                if let Some(s) = &soft {
                    x = Some(match x {
                        Some(x) => Tensor::cat(&[s, &x], 1)?,
                        None => s.clone(),
                    });
                }
            }
            if let Some(x) = x {
                computed += x.dim(1)?;
                let step = Step { positions: None, mask: None };
                backbone.forward(&x, &step, Some(&mut kv), &view, Mode::Fast)?;
                self.cache.insert(role, fp, head, kv.clone());
            }
        }
        // 2. Each row's own tail, left-padded to a common length, as one batch.
        let past = kv.len;
        let tails: Vec<&[u32]> = prompts.iter().map(|p| &p[shared..]).collect();
        let t_max = tails.iter().map(|t| t.len()).max().unwrap_or(1);
        let pads: Vec<usize> = tails.iter().map(|t| t_max - t.len()).collect();
        if b > 1 {
            kv = if kv.len > 0 { kv.expand(b)? } else { kv };
        }
        let pad_id = self.tokenizer.eos_ids()[0];
        let mut ids = Vec::with_capacity(b * t_max);
        for (t, &np) in tails.iter().zip(&pads) {
            ids.extend(std::iter::repeat_n(pad_id, np));
            ids.extend_from_slice(t);
        }
        let ids = Tensor::from_vec(ids, (b, t_max), self.device())?;
        let mut x = backbone.embed(&ids)?;
        if past == 0 {
            if let Some(s) = &soft {
                // Nothing cached and no shared head: the role tokens lead every row.
                let (_, n, h) = s.dims3()?;
                x = Tensor::cat(&[&s.broadcast_as((b, n, h))?.contiguous()?, &x], 1)?;
            }
        }
        let lead = x.dim(1)? - t_max; // soft tokens placed in this step, if any
        let step = if pads.iter().any(|&p| p > 0) {
            // Positions skip the pads; pads are invisible to every query.
            let q = lead + t_max;
            let mut positions = Vec::with_capacity(b * q);
            let mut mask = vec![0f32; b * q * (past + q)];
            for (r, &np) in pads.iter().enumerate() {
                for i in 0..q {
                    let real = i >= lead + np || i < lead;
                    let pos = if i < lead { i } else if real { past + lead + (i - lead - np) } else { 0 };
                    positions.push(pos as u32);
                    for j in 0..past + q {
                        let key_in_step = j >= past;
                        let k = j.wrapping_sub(past);
                        let visible = if key_in_step {
                            let key_is_pad = k >= lead && k < lead + np;
                            k <= i && !key_is_pad
                        } else {
                            true
                        };
                        if !visible {
                            mask[(r * q + i) * (past + q) + j] = MASKED;
                        }
                    }
                }
            }
            Step {
                positions: Some(positions),
                mask: Some(Tensor::from_vec(mask, (b, 1, 1, q, past + q), self.device())?),
            }
        } else {
            Step { positions: None, mask: None }
        };
        computed += b * t_max + lead;
        let hidden = backbone.forward(&x, &step, Some(&mut kv), &view, Mode::Fast)?;
        let last_hidden = hidden.narrow(1, lead + t_max - 1, 1)?.squeeze(1)?;
        if b == 1 {
            // The whole prompt, for the next call that extends it (the next repair).
            self.cache.insert(role, fp, &prompts[0], kv.clone());
        }
        let next_pos = tails
            .iter()
            .map(|t| (past + lead + t.len()) as u32)
            .collect();
        Ok(Prefilled {
            kv,
            last_hidden,
            next_pos,
            pads,
            pad_start: past + lead,
            cached,
            computed,
        })
    }


    /// Logits of the next token after each row of `prompts`, from the generation path
    /// (quantized weights, fused kernels, prefix cache, batching), e.g. to score choices.
    pub fn next_token_logits(&mut self, role: Role, prompts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>> {
        let pre = self.prefill(role, prompts)?;
        let backbone = self.gen_backbone(role);
        Ok(backbone.logits(&pre.last_hidden)?.to_vec2::<f32>()?)
    }
}


/// Mask and positions for one decode step of `n` rows.
fn decode_step(next_pos: &[u32], pads: &[usize], pad_start: usize, past: usize, dev: &Device) -> Result<Step> {
    if pads.iter().all(|&p| p == 0) {
        // Every row is at the same position with nothing to hide: plain causal.
        return Ok(Step { positions: None, mask: None });
    }
    let n = next_pos.len();
    let kv = past + 1;
    let mut mask = vec![0f32; n * kv];
    for (r, &np) in pads.iter().enumerate() {
        for j in pad_start..pad_start + np {
            mask[r * kv + j] = MASKED;
        }
    }
    Ok(Step {
        positions: Some(next_pos.to_vec()),
        mask: Some(Tensor::from_vec(mask, (n, 1, 1, 1, kv), dev)?),
    })
}

/// The earliest stop string in `text`: (byte offset, the string).
fn first_stop(text: &str, stops: &[String]) -> Option<(usize, String)> {
    stops
        .iter()
        .filter_map(|s| text.find(s.as_str()).map(|at| (at, s.clone())))
        .min_by_key(|(at, _)| *at)
}
