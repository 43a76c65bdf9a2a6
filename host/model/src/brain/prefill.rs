//! Prefill: a batch's prompts in prefix groups, each group's shared head computed once (and
//! cached), then every row's own tail as one left-padded batch; the masks and positions that
//! hide the padding.

use crate::budget::{PREFILL_POSITIONS, PREFILL_SCORES};

use super::*;

/// The state after prefilling a batch: caches, per-row positions and last hidden states.
pub(super) struct Prefilled {
    pub(super) kv: KvCache,
    /// `(b, hidden)` final hidden state of each row's last prompt token.
    pub(super) last_hidden: Tensor,
    /// Per row, the RoPE position of the next token.
    pub(super) next_pos: Vec<u32>,
    /// Per row, the cache slots `[pad_start, pad_start + pads)` that hold padding (after a
    /// head shorter than the batch's longest, and before a tail shorter than the longest).
    pub(super) pads: Vec<usize>,
    pub(super) pad_start: Vec<usize>,
    /// Per row, the prompt tokens whose keys and values came from the prefix cache.
    pub(super) cached: Vec<usize>,
    /// Per row, the front of its cache it holds in common with other rows.
    pub(super) fronts: Vec<SameFront>,
    pub(super) computed: usize,
}

/// Rows of a batch whose caches begin alike: every row of one `class` holds the same keys
/// and values, bit for bit, in its first `keys` slots (the head a prefix group prefilled
/// once, or the whole prefill of one prompt copied to each of its samples). Decoding reads
/// those slots once for the class ([`shared_keys`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SameFront {
    pub(super) class: u32,
    pub(super) keys: usize,
}

/// Per row, `(first row of its class, keys they share)`, as [`Step::shared_keys`] takes
/// it; `None` where no two rows share a slot.
pub(super) fn shared_keys(fronts: &[SameFront]) -> Option<Arc<[(usize, usize)]>> {
    let sources: Vec<(usize, usize)> = fronts
        .iter()
        .map(|f| (fronts.iter().position(|g| g.class == f.class).expect("a row is of its own class"), f.keys))
        .collect();
    let any = sources.iter().enumerate().any(|(row, &(source, keys))| source != row && keys > 0);
    any.then(|| sources.into())
}

impl Prefilled {
    /// The prefill of `of_row.len()` rows, row `i` a copy of prefilled row `of_row[i]`.
    /// Copies of one row share their whole cache.
    pub(super) fn rows(self, of_row: &[u32]) -> Result<Prefilled> {
        let idx = Tensor::new(of_row, self.last_hidden.device())?;
        let prefilled = self.next_pos.len() as u32;
        let fronts = of_row
            .iter()
            .map(|&r| match of_row.iter().filter(|&&o| o == r).count() {
                1 => self.fronts[r as usize],
                _ => SameFront { class: prefilled + r, keys: self.kv.len },
            })
            .collect();
        Ok(Prefilled {
            fronts,
            kv: self.kv.select_rows(of_row)?,
            last_hidden: self.last_hidden.contiguous()?.index_select(&idx, 0)?,
            next_pos: of_row.iter().map(|&r| self.next_pos[r as usize]).collect(),
            pads: of_row.iter().map(|&r| self.pads[r as usize]).collect(),
            pad_start: of_row.iter().map(|&r| self.pad_start[r as usize]).collect(),
            cached: of_row.iter().map(|&r| self.cached[r as usize]).collect(),
            ..self
        })
    }
}

/// Rows of a batch that share a head: `rows` (indices into the prompts) and the number of
/// leading tokens all of them share, each row keeping at least one token of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PrefixGroup {
    rows: Vec<usize>,
    shared: usize,
}

/// The prompts in groups whose shared heads are prefilled once each: the prompts sorted (so
/// that prompts sharing a domain, then a task, sit together) and cut wherever neighbours
/// share fewer than θ tokens, θ chosen to compute the fewest positions: every group's head
/// once plus every row's tail padded to the longest of its [`tail_batches`]. One group (the batch's common
/// prefix, as before grouping) wins ties. Batches of one domain stay one group; the Judge's
/// and the Editor's prompts of several domains and tasks share their domain and task text.
fn prefix_groups(prompts: &[Vec<u32>]) -> Vec<PrefixGroup> {
    let mut order: Vec<usize> = (0..prompts.len()).collect();
    order.sort_by(|&a, &b| prompts[a].cmp(&prompts[b]));
    let lcp: Vec<usize> = order.windows(2).map(|w| common_prefix(&prompts[w[0]], &prompts[w[1]])).collect();
    let cut = |theta: usize| -> Vec<PrefixGroup> {
        let mut groups = Vec::new();
        let mut rows = vec![order[0]];
        let mut shared = usize::MAX;
        let close = |rows: Vec<usize>, shared: usize| {
            let min_len = rows.iter().map(|&r| prompts[r].len()).min().unwrap_or(1);
            PrefixGroup { shared: shared.min(min_len.saturating_sub(1)), rows }
        };
        for (i, &l) in lcp.iter().enumerate() {
            if l >= theta {
                rows.push(order[i + 1]);
                shared = shared.min(l);
            } else {
                groups.push(close(std::mem::take(&mut rows), shared));
                rows.push(order[i + 1]);
                shared = usize::MAX;
            }
        }
        groups.push(close(rows, shared));
        groups
    };
    let cost = |groups: &[PrefixGroup]| -> usize { groups.iter().map(|g| g.shared).sum::<usize>() + tail_batches(prompts, groups).cost };
    let mut best = vec![PrefixGroup { rows: (0..prompts.len()).collect(), shared: cut(0)[0].shared }];
    let mut best_cost = cost(&best);
    let mut thetas = lcp.clone();
    thetas.sort_unstable();
    thetas.dedup();
    for theta in thetas.into_iter().filter(|&t| t > 0).chain([usize::MAX]) {
        let groups = cut(theta);
        // Every head must hold a position: a group with nothing shared cannot be padded to.
        if groups.len() > 1 && groups.iter().any(|g| g.shared == 0) {
            continue;
        }
        let c = cost(&groups);
        if c < best_cost {
            (best, best_cost) = (groups, c);
        }
    }
    best
}

/// A forward's own cost in prefill positions: every weight read once, whatever the batch
/// (batch-1 decode runs at about a seventh of prefill's rate per position), with room for
/// small chunks that do not fill the kernels.
const TAIL_BATCH_POSITIONS: usize = 32;

/// How the groups' tails run: `batches` of group indices, each batch's tails left-padded to
/// its longest; `cost`, the positions that computes plus [`TAIL_BATCH_POSITIONS`] a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TailPlan {
    batches: Vec<Vec<usize>>,
    cost: usize,
}

/// The groups in tail batches: in order of their longest tail, cut where padding a group's
/// tails to the next ones' longest costs more positions than a forward of their own
/// ([`TAIL_BATCH_POSITIONS`]), so that a 900-token repair is not padded to a 2,200-token one
/// of another task. Fewest positions in all (dynamic programming over the cuts).
fn tail_batches(prompts: &[Vec<u32>], groups: &[PrefixGroup]) -> TailPlan {
    let longest_tail = |g: &PrefixGroup| g.rows.iter().map(|&r| prompts[r].len() - g.shared).max().unwrap_or(0);
    let mut by_tail: Vec<usize> = (0..groups.len()).collect();
    by_tail.sort_by_key(|&g| longest_tail(&groups[g]));
    // best[j]: the fewest positions for the first j groups, and where its last batch starts.
    let mut best = vec![(0usize, 0usize); by_tail.len() + 1];
    for j in 1..=by_tail.len() {
        let t = longest_tail(&groups[by_tail[j - 1]]);
        let mut rows = 0;
        best[j] = (usize::MAX, 0);
        for i in (0..j).rev() {
            rows += groups[by_tail[i]].rows.len();
            let cost = best[i].0 + TAIL_BATCH_POSITIONS + rows * t;
            if cost < best[j].0 {
                best[j] = (cost, i);
            }
        }
    }
    let mut batches = Vec::new();
    let mut j = by_tail.len();
    while j > 0 {
        let i = best[j].1;
        batches.push(by_tail[i..j].to_vec());
        j = i;
    }
    batches.reverse();
    TailPlan { batches, cost: best[by_tail.len()].0 }
}

/// One tail batch of [`Brain::prefill`], its rows in `order` (indices into the prompts).
struct TailBatch {
    order: Vec<usize>,
    kv: KvCache,
    last_hidden: Tensor,
    pads: Vec<usize>,
    pad_start: Vec<usize>,
    cached: Vec<usize>,
    fronts: Vec<SameFront>,
    /// Where the batch's padding slots meet (after the longest head and the role tokens,
    /// before the tails' left padding): a wider batch beside it adds hidden slots here.
    widen_at: usize,
    computed: usize,
}

impl TailBatch {
    /// The batches as one prefill (their rows in the returned order), after heads that
    /// computed `head_positions`: each batch's cache widened to the longest, the added slots
    /// joining every row's run of hidden ones.
    fn stack(mut parts: Vec<TailBatch>, head_positions: usize) -> Result<(Vec<usize>, Prefilled)> {
        let computed = head_positions + parts.iter().map(|p| p.computed).sum::<usize>();
        let end = parts.iter().map(|p| p.kv.len).max().unwrap_or(0);
        let kv = match parts.len() {
            1 => parts[0].kv.clone(),
            _ => {
                let widened: Vec<(&KvCache, usize)> = parts.iter().map(|p| (&p.kv, p.widen_at)).collect();
                KvCache::stack_widened(&widened, end)?
            }
        };
        for p in &mut parts {
            let added = end - p.kv.len;
            p.pads.iter_mut().for_each(|np| *np += added);
        }
        let last_hidden = match parts.len() {
            1 => parts[0].last_hidden.clone(),
            _ => Tensor::cat(&parts.iter().map(|p| &p.last_hidden).collect::<Vec<_>>(), 0)?,
        };
        let (mut order, mut pads, mut pad_start, mut cached, mut fronts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for p in parts {
            order.extend(p.order);
            pads.extend(p.pads);
            pad_start.extend(p.pad_start);
            cached.extend(p.cached);
            fronts.extend(p.fronts);
        }
        let next_pos = pads.iter().map(|&np| (end - np) as u32).collect();
        Ok((order, Prefilled { kv, last_hidden, next_pos, pads, pad_start, cached, fronts, computed }))
    }
}

/// The distinct prompts, in order of first appearance, and for each prompt the index of its
/// distinct copy: a group's samples share one prompt, which is prefilled once.
pub(super) fn distinct_prompts(prompts: &[Vec<u32>]) -> (Vec<Vec<u32>>, Vec<u32>) {
    let mut distinct: Vec<Vec<u32>> = Vec::new();
    let mut of_row = Vec::with_capacity(prompts.len());
    for p in prompts {
        let at = match distinct.iter().position(|d| d == p) {
            Some(at) => at,
            None => {
                distinct.push(p.clone());
                distinct.len() - 1
            }
        };
        of_row.push(at as u32);
    }
    (distinct, of_row)
}

impl Brain {
    /// Refuses a request of `rows` rows of `positions` positions whose estimate passes the
    /// budget, before any model time. The prefix cache's KV buffers count against the
    /// budget too, but for those the request's `prompts` would extend: the cache is a
    /// reuse, not a need, so its oldest other entries give way first.
    fn check_memory(&mut self, role: Role, fp: u64, prompts: &[Vec<u32>], rows: usize, positions: usize) -> Result<()> {
        let budget = self.memory_budget_mib();
        let request = self.memory_estimate(rows, positions);
        request.check(budget, rows, positions)?;
        let held_mib = |cache: &super::PrefixCache| cache.held_bytes_beside(role, fp, prompts) as f64 / (1 << 20) as f64;
        while request.total_mib() + held_mib(&self.cache) > budget as f64 && self.cache.evict_oldest_beside(role, fp, prompts) {}
        Ok(())
    }

    /// Runs the prompts through the backbone, reusing cached prefixes.
    ///
    /// The rows go in [`prefix_groups`]: each group's shared head is computed once at batch 1
    /// (and cached, so that the next call with the same system text, domain or task starts
    /// from it), then every row's own tail runs as one left-padded batch after its group's
    /// head. Groups with heads of different lengths sit in one cache padded to the longest,
    /// the padding hidden by the mask.
    pub(super) fn prefill(&mut self, role: Role, prompts: &[Vec<u32>], rows: usize, max_new: usize) -> Result<Prefilled> {
        let n_soft = self.cfg.role_tokens;
        for p in prompts {
            self.check_prompt(p)?;
        }
        let fp = self.fingerprint(role)?;
        let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
        self.check_memory(role, fp, prompts, rows, n_soft + longest + max_new)?;
        let backbone = self.gen_backbone(role).clone();
        let params = self.role_params(role).clone();
        let view = params.view(self.scale, true)?;
        let soft = params.soft_tokens(true)?;
        let b = prompts.len();
        let groups = prefix_groups(prompts);
        let mut head_positions = 0;

        // 1. Each group's head (and the soft tokens, if not cached), once, at batch 1.
        let mut heads = Vec::with_capacity(groups.len());
        for g in &groups {
            let head = &prompts[g.rows[0]][..g.shared];
            let (cached, mut kv) = match self.cache.lookup(role, fp, head, n_soft)? {
                Some((m, kv)) => (m, kv),
                None => (0, KvCache::new(backbone.blocks.len())),
            };
            if kv.len == 0 || cached < g.shared {
                let ids = Tensor::new(&head[cached..], self.device())?.unsqueeze(0)?;
                let mut x = if g.shared > cached { Some(backbone.embed(&ids)?) } else { None };
                if kv.len == 0 {
                    if let Some(s) = &soft {
                        x = Some(match x {
                            Some(x) => Tensor::cat(&[s, &x], 1)?,
                            None => s.clone(),
                        });
                    }
                }
                if let Some(x) = x {
                    let n = x.dim(1)?;
                    head_positions += n;
                    // In chunks of columns, as the tails below: a long prompt is mostly head.
                    let cols = causal_columns(&backbone, 1, kv.len + n);
                    let mut c0 = 0;
                    while c0 < n {
                        let c1 = (c0 + cols).min(n);
                        let step = Step::causal();
                        backbone.forward(&x.narrow(1, c0, c1 - c0)?.contiguous()?, &step, Some(&mut kv), &view, Mode::Fast)?;
                        c0 = c1;
                    }
                    self.cache.insert(role, fp, head, kv.clone());
                }
            }
            heads.push((cached, kv));
        }
        // 2. Each row's own tail after its group's head: the groups in batches of similar
        // longest tails, each batch's tails left-padded to its longest.
        let mut parts = Vec::new();
        for batch in tail_batches(prompts, &groups).batches {
            let batch: Vec<(&PrefixGroup, &(usize, KvCache))> = batch.iter().map(|&g| (&groups[g], &heads[g])).collect();
            parts.push(self.prefill_tails(role, fp, prompts, &batch, &backbone, &view, soft.as_ref())?);
        }
        let (order, pre) = TailBatch::stack(parts, head_positions)?;
        if b == 1 {
            // The whole prompt, for the next call that extends it (the next repair).
            self.cache.insert(role, fp, &prompts[0], pre.kv.clone());
        }
        if order.iter().enumerate().all(|(i, &r)| i == r) {
            return Ok(pre);
        }
        // Back to the callers' order.
        let mut place = vec![0u32; b];
        for (i, &r) in order.iter().enumerate() {
            place[r] = i as u32;
        }
        pre.rows(&place)
    }

    /// Step 2 of [`Brain::prefill`] for the groups of one tail batch: each row's own tail,
    /// left-padded to the batch's longest, as one batch after its group's head (heads of
    /// different lengths sit in one cache padded to the longest, the padding hidden).
    #[allow(clippy::too_many_arguments)]
    fn prefill_tails(
        &mut self,
        role: Role,
        fp: u64,
        prompts: &[Vec<u32>],
        groups: &[(&PrefixGroup, &(usize, KvCache))],
        backbone: &Backbone,
        view: &RoleView,
        soft: Option<&Tensor>,
    ) -> Result<TailBatch> {
        let n_soft = self.cfg.role_tokens;
        // The rows in group order, and each row's place in it.
        let order: Vec<usize> = groups.iter().flat_map(|(g, _)| g.rows.iter().copied()).collect();
        let b = order.len();
        let shared_of: Vec<usize> = groups.iter().flat_map(|(g, _)| g.rows.iter().map(|_| g.shared)).collect();
        let past = groups.iter().map(|(_, (_, kv))| kv.len).max().unwrap_or(0);
        let mut kv = if groups.len() == 1 {
            let kv = groups[0].1 .1.clone();
            if b > 1 && kv.len > 0 {
                kv.expand(b)?
            } else {
                kv
            }
        } else {
            let parts: Vec<(&KvCache, usize)> = groups.iter().map(|(g, (_, kv))| (kv, g.rows.len())).collect();
            KvCache::stack_padded(&parts, past)?
        };
        // Per row (group order): where its head ends, so where its padding starts.
        let head_len: Vec<usize> = groups.iter().flat_map(|(g, (_, kv))| g.rows.iter().map(move |_| kv.len)).collect();
        let cached: Vec<usize> = groups.iter().flat_map(|(g, (c, _))| g.rows.iter().map(move |_| *c)).collect();
        // A group's rows hold its head in their first slots (expanded or stacked above).
        let fronts: Vec<SameFront> = groups
            .iter()
            .flat_map(|(g, (_, kv))| g.rows.iter().map(move |_| SameFront { class: g.rows[0] as u32, keys: kv.len }))
            .collect();

        let tails: Vec<&[u32]> = order.iter().zip(&shared_of).map(|(&r, &s)| &prompts[r][s..]).collect();
        let t_max = tails.iter().map(|t| t.len()).max().unwrap_or(1);
        let pad_id = self.tokenizer.eos_ids()[0];
        let mut ids = Vec::with_capacity(b * t_max);
        for t in &tails {
            ids.extend(std::iter::repeat_n(pad_id, t_max - t.len()));
            ids.extend_from_slice(t);
        }
        let ids = Tensor::from_vec(ids, (b, t_max), self.device())?;
        let mut x = backbone.embed(&ids)?;
        if past == 0 {
            if let Some(s) = soft {
                // Nothing cached and no shared head: the role tokens lead every row.
                let (_, n, h) = s.dims3()?;
                x = Tensor::cat(&[&s.broadcast_as((b, n, h))?.contiguous()?, &x], 1)?;
            }
        }
        let lead = x.dim(1)? - t_max; // soft tokens placed in this step, if any
        let computed = b * t_max + lead;
        // Each row's hidden slots, one run: its head's padding up to `past`, then its tail's
        // left padding (after the soft tokens of this step).
        let pad_start: Vec<usize> = head_len.iter().map(|&h| if past == 0 { lead } else { h }).collect();
        let pads: Vec<usize> = tails.iter().zip(&head_len).map(|(t, &h)| past - h + t_max - t.len()).collect();
        // In chunks of columns, so that a batch of long tails (a batch of repair prompts, or
        // of Judge prompts) never holds more than PREFILL_POSITIONS positions' activations,
        // nor more than PREFILL_SCORES attention scores and mask entries, at once.
        let q_all = lead + t_max;
        let cols = match pads.iter().all(|&p| p == 0) {
            true => causal_columns(backbone, b, past + q_all),
            false => prefill_columns(b, past + q_all, backbone.cfg.num_attention_heads),
        };
        let mut last_hidden = None;
        let mut g0 = 0;
        while g0 < q_all {
            let g1 = (g0 + cols).min(q_all);
            let step = match pads.iter().any(|&p| p > 0) {
                true => tail_step(&pad_start, &pads, past, g0..g1, self.device())?,
                false => Step::causal(),
            };
            let xc = x.narrow(1, g0, g1 - g0)?.contiguous()?;
            let hidden = backbone.forward(&xc, &step, Some(&mut kv), view, Mode::Fast)?;
            if g1 == q_all {
                last_hidden = Some(hidden.narrow(1, g1 - g0 - 1, 1)?.squeeze(1)?);
            }
            g0 = g1;
        }
        let last_hidden = last_hidden.expect("every prompt has a tail");
        let end = past + q_all;
        if self.prompt_heads.keeps(role) {
            // Each prompt but its last token, which the learner runs with a graph.
            for (i, &r) in order.iter().enumerate() {
                let p = &prompts[r];
                if end - pads[i] != n_soft + p.len() {
                    continue; // not this layout; the learner computes the head itself
                }
                let hidden = pad_start[i]..pad_start[i] + pads[i];
                let head = kv.row_without(i, hidden, end - 1)?;
                self.prompt_heads.insert(role, fp, &p[..p.len() - 1], &head)?;
            }
        }
        Ok(TailBatch { order, kv, last_hidden, pads, pad_start, cached, fronts, widen_at: past + lead, computed })
    }
}

/// Columns per prefill forward for `b` rows attending to up to `keys` positions.
pub(super) fn prefill_columns(b: usize, keys: usize, heads: usize) -> usize {
    (PREFILL_POSITIONS / b).min(PREFILL_SCORES / (b * heads * keys).max(1)).max(1)
}

/// Columns per prefill forward of a causal step (no padding to mask) for `b` rows attending
/// to up to `keys` positions: where the backbone fuses causal attention there is no score
/// matrix, so only the positions bound a chunk.
fn causal_columns(backbone: &Backbone, b: usize, keys: usize) -> usize {
    match backbone.fuses_causal_attention() {
        true => (PREFILL_POSITIONS / b).max(1),
        false => prefill_columns(b, keys, backbone.cfg.num_attention_heads),
    }
}

/// Positions and mask for columns `cols` of a batch's tails, after `past` cached slots: row
/// `r` hides slots `[pad_start[r], pad_start[r] + pads[r])` (its head's padding, its tail's
/// left padding) from every query, and its positions skip them.
fn tail_step(pad_start: &[usize], pads: &[usize], past: usize, cols: std::ops::Range<usize>, dev: &Device) -> Result<Step> {
    let (b, q) = (pads.len(), cols.len());
    let keys = past + cols.end;
    let mut positions = Vec::with_capacity(b * q);
    let mut mask = vec![0f32; b * q * keys];
    // Each row's padding among this step's keys: the mask's hidden run (the rest is causal).
    let runs: Arc<[(usize, usize)]> =
        pad_start.iter().zip(pads).map(|(&s, &np)| (s.min(keys), (s + np).min(keys) - s.min(keys))).collect();
    for (r, (&start, &np)) in pad_start.iter().zip(pads).enumerate() {
        let hidden = start..start + np;
        for (i, g) in cols.clone().enumerate() {
            let slot = past + g;
            let pos = if slot < start {
                slot
            } else if hidden.contains(&slot) {
                0
            } else {
                slot - np
            };
            positions.push(pos as u32);
            let row = &mut mask[(r * q + i) * keys..][..keys];
            row[hidden.start.min(keys)..hidden.end.min(keys)].fill(MASKED);
            row[slot + 1..].fill(MASKED);
        }
    }
    Ok(Step {
        positions: Some(positions),
        mask: Some(Tensor::from_vec(mask, (b, 1, 1, q, keys), dev)?),
        hidden: Some(runs),
        constant_keys: (0, 0),
        decode: false,
        shared_keys: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prompt: `system` tokens, then `domain`, then `own` (each a run of one id).
    fn prompt(parts: &[(u32, usize)]) -> Vec<u32> {
        parts.iter().flat_map(|&(id, n)| std::iter::repeat_n(id, n)).collect()
    }

    #[test]
    fn rows_of_one_class_read_the_first_rows_front() {
        let front = |class, keys| SameFront { class, keys };
        let fronts = [front(4, 900), front(7, 0), front(4, 900), front(9, 30), front(4, 900)];
        let got = shared_keys(&fronts).expect("rows 2 and 4 share row 0's front");
        assert_eq!(&got[..], &[(0, 900), (1, 0), (0, 900), (3, 30), (0, 900)]);
        // Each row alone in its class, or a class sharing nothing: no sharing to claim.
        assert!(shared_keys(&[front(1, 900), front(2, 900)]).is_none());
        assert!(shared_keys(&[front(1, 0), front(1, 0)]).is_none());
    }

    #[test]
    fn prompts_of_several_domains_group_by_domain() {
        // Two domains of 300 tokens after a 50-token system text, two tasks each.
        let prompts = vec![
            prompt(&[(1, 50), (2, 300), (5, 40)]),
            prompt(&[(1, 50), (3, 300), (6, 60)]),
            prompt(&[(1, 50), (2, 300), (7, 30)]),
            prompt(&[(1, 50), (3, 300), (8, 50)]),
        ];
        let groups = prefix_groups(&prompts);
        assert_eq!(groups, vec![PrefixGroup { rows: vec![0, 2], shared: 350 }, PrefixGroup { rows: vec![1, 3], shared: 350 }]);
    }

    #[test]
    fn one_domain_stays_one_group_and_a_single_prompt_keeps_a_token() {
        let prompts = vec![prompt(&[(1, 50), (2, 300), (5, 40)]), prompt(&[(1, 50), (2, 300), (6, 40)])];
        assert_eq!(prefix_groups(&prompts), vec![PrefixGroup { rows: vec![0, 1], shared: 350 }]);
        assert_eq!(prefix_groups(&prompts[..1]), vec![PrefixGroup { rows: vec![0], shared: 389 }]);
        // Nothing shared between two one-token prompts: one group with an empty head.
        assert_eq!(prefix_groups(&[vec![4], vec![9]]), vec![PrefixGroup { rows: vec![0, 1], shared: 0 }]);
    }

    #[test]
    fn short_tails_do_not_split_a_batch_for_nothing() {
        // Splitting at the domain saves 300 positions, but the longest tail stays; the
        // split wins only where it computes fewer positions in all.
        let prompts = vec![prompt(&[(1, 50), (2, 10), (5, 400)]), prompt(&[(1, 50), (3, 10), (6, 400)])];
        assert_eq!(prefix_groups(&prompts), vec![PrefixGroup { rows: vec![0, 1], shared: 50 }]);
    }

    #[test]
    fn a_long_groups_tails_do_not_pad_a_short_groups() {
        // Two tasks' repairs, two each: one task's tails near 900 tokens, the other's near
        // 2,200 (after a shared 400-token head each). One batch would pad all four to 2,200.
        let prompts = vec![
            prompt(&[(1, 50), (2, 350), (5, 900)]),
            prompt(&[(1, 50), (3, 350), (6, 2200)]),
            prompt(&[(1, 50), (2, 350), (7, 880)]),
            prompt(&[(1, 50), (3, 350), (8, 2150)]),
        ];
        let groups = prefix_groups(&prompts);
        assert_eq!(groups, vec![PrefixGroup { rows: vec![0, 2], shared: 400 }, PrefixGroup { rows: vec![1, 3], shared: 400 }]);
        let plan = tail_batches(&prompts, &groups);
        assert_eq!(plan.batches, vec![vec![0], vec![1]]);
        assert_eq!(plan.cost, 2 * TAIL_BATCH_POSITIONS + 2 * 900 + 2 * 2200);
    }

    #[test]
    fn tails_of_like_length_share_one_forward() {
        // Three groups of one-token tails and one whose tails differ by less than a forward's
        // own cost: one batch, groups in order of their longest tail.
        let prompts = vec![
            prompt(&[(1, 50), (2, 300), (5, 40)]),
            prompt(&[(1, 50), (3, 300), (6, 44)]),
            prompt(&[(1, 50), (2, 300), (7, 41)]),
            prompt(&[(1, 50), (3, 300), (8, 30)]),
        ];
        let groups = prefix_groups(&prompts);
        assert_eq!(groups.len(), 2);
        let plan = tail_batches(&prompts, &groups);
        assert_eq!(plan.batches, vec![vec![0, 1]]);
        assert_eq!(plan.cost, TAIL_BATCH_POSITIONS + 4 * 44);
        // A single group is a single batch.
        let one = [PrefixGroup { rows: vec![0, 1, 2, 3], shared: 50 }];
        assert_eq!(tail_batches(&prompts, &one).batches, vec![vec![0]]);
    }

    #[test]
    fn tail_masks_hide_each_rows_padding_and_positions_skip_it() {
        // Row 0: a 3-slot head, then 1 slot of head padding and no tail padding; row 1: a
        // 4-slot head and a tail one token shorter (1 slot of left padding).
        let step = tail_step(&[3, 4], &[1, 1], 4, 0..2, &Device::Cpu).unwrap();
        assert_eq!(step.positions.unwrap(), vec![3, 4, 0, 4]);
        let mask: Vec<f32> = step.mask.unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let open = |m: &[f32]| m.iter().map(|&v| v == 0.0).collect::<Vec<_>>();
        // Row 0, query at slot 4: sees 0..3 and itself, not its head padding (slot 3).
        assert_eq!(open(&mask[0..6]), [true, true, true, false, true, false]);
        // Row 1, query at slot 5 (its first tail token): its own 4 head slots and itself.
        assert_eq!(open(&mask[18..24]), [true, true, true, true, false, true]);
    }
}
