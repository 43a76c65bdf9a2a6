//! Times one learner update of the default model on recorded multi-role episodes, without the
//! rollouts: a probe used while building the learner on the sampler's weights (the benchmark
//! is `onebrain bench training`), with `configs/train-1.5b-full.toml`'s PPO settings. Rewards
//! are overwritten so no sample is inert.
//!
//! ```sh
//! cargo run --release -p onebrain-bench --example update_probe -- TRACE.jsonl [new|dense] [JUDGE_TAIL]
//! ```
//! TRACE is an eval trace (groups of four in order) or a training run's `episodes.jsonl`
//! (its own groups).
//! `PROBE_N` caps the episodes (16); `PROBE_EPOCHS` and `PROBE_MINIBATCHES` set PPO's loop
//! (1, 1); `PROBE_FREE=1` drops the constraints (a trace recorded under an older grammar no
//! longer replays); `PROBE_ALLOWED_LOGITS=1` takes logits only over
//! each position's allowed tokens (`allowed_logits`); `PROBE_RECOMPUTE=1` recomputes each
//! block in the backward (`recompute_blocks`); `PROBE_JUDGE_HEAD_ONLY=1` trains the
//! Judge's head alone on states computed without a graph (`judge-head-only`);
//! `PROBE_SAMPLER_JUDGE=1` first scores the Judge prompts as a run's rollouts do, so the
//! update finds their states kept; `PROBE_SAMPLER_HEADS=1` prefills the policy prompts so,
//! so the update finds their heads kept (`PROBE_PREFILL_ROWS` prompts a call, 4).
//!
//! Besides the resident set, the probe counts the bytes the program holds (a counting global
//! allocator): a peak of live bytes well under the resident peak is the allocator's, not the
//! update's (freed blocks the heap keeps resident, or fragmentation). `PROBE_EVENTS=1` logs
//! the update's large blocks and prints those live at its peak, by size.
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::time::Instant;

use onebrain_model::{Brain, CountingAllocator, LearnerWeights, ModelConfig};
use onebrain_train::{Ablation, Advantage, Batch, Learner, PpoArgs};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let trace = Path::new(&args[1]);
    let dense = args.get(2).is_some_and(|a| a == "dense");
    let tail: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(384);
    let n: usize = std::env::var("PROBE_N").ok().and_then(|v| v.parse().ok()).unwrap_or(16);
    let mut recs = read_groups(trace);
    recs.truncate(n);
    let cfg = if dense {
        ModelConfig { learner_weights: LearnerWeights::Dense, ..Default::default() }
    } else {
        let allowed_logits = std::env::var("PROBE_ALLOWED_LOGITS").is_ok_and(|v| v == "1");
        let recompute_blocks = match std::env::var("PROBE_RECOMPUTE").is_ok_and(|v| v == "1") {
            true => onebrain_model::RecomputeBlocks::Always,
            false => onebrain_model::RecomputeBlocks::Never,
        };
        ModelConfig { lora_rank: Some(8), lora_targets: Some(vec!["q_proj".into(), "v_proj".into()]), allowed_logits, recompute_blocks, ..Default::default() }
    };
    let brain = Brain::load(&cfg).unwrap();
    eprintln!("sampler weights: {}, rss {:?}", brain.learns_on_sampler_weights(), onebrain_model::rss_mib());
    let mut batch = Batch::from_records(&recs, Ablation::Full, |p| brain.encode(p)).unwrap();
    // Rewards vary within groups so no sample is inert.
    for (k, s) in batch.policy.iter_mut().enumerate() {
        s.reward = (k % 3) as f32 * 0.5;
        if std::env::var("PROBE_FREE").is_ok() { s.constraint = None; }
    }
    eprintln!("policy samples {}, tokens {}, judge {}", batch.policy.len(), batch.policy_tokens(), batch.judge.len());
    let args = PpoArgs { batch_size: 16, group_size: 4, advantage: Advantage::Group, detach_prompt: true, judge_tail: tail, judge_head_only: std::env::var("PROBE_JUDGE_HEAD_ONLY").is_ok_and(|v| v == "1"), learning_rate: 2e-4, update_epochs: env_usize("PROBE_EPOCHS", 1), num_minibatches: env_usize("PROBE_MINIBATCHES", 1), ..Default::default() };
    let mut learner = Learner::new(brain, None, args, Ablation::Full, 0).unwrap();
    if std::env::var("PROBE_PREFILL_AB").is_ok_and(|v| v == "1") {
        // The same prompts' keys and values, twice each way: the sampler's prefill (one
        // prompt a call, its prefix cache on) against the learner's prompt heads.
        let mut prompts: Vec<(onebrain_model::Role, Vec<u32>)> =
            batch.policy.iter().map(|s| (s.role, s.prompt.clone())).collect();
        prompts.sort();
        prompts.dedup();
        let n: usize = prompts.iter().map(|(_, p)| p.len()).sum();
        for round in 0..2 {
            learner.brain().clear_prefix_cache();
            let t = Instant::now();
            for (role, p) in &prompts {
                learner.brain().next_token_logits(*role, std::slice::from_ref(p)).unwrap();
            }
            eprintln!("round {round}: sampler prefill of {} prompts ({n} tokens) {:.1} s", prompts.len(), t.elapsed().as_secs_f64());
            let t = Instant::now();
            let mut last: Option<onebrain_model::PromptHead> = None;
            for (role, p) in &prompts {
                let h = learner.brain_ref().extend_prompt_head(*role, &p[..p.len() - 1], last.as_ref()).unwrap();
                last = Some(h);
            }
            eprintln!("round {round}: learner heads {:.1} s", t.elapsed().as_secs_f64());
        }
        return;
    }
    if std::env::var("PROBE_SAMPLER_JUDGE").is_ok_and(|v| v == "1") {
        // As in a run: the sampler's Judge scores each candidate before the update.
        let t = Instant::now();
        for rows in batch.judge.chunks(4) {
            let prompts: Vec<Vec<u32>> = rows.iter().map(|j| j.prompt.clone()).collect();
            learner.brain().judge_tokens(&prompts).unwrap();
        }
        eprintln!("sampler's Judge scoring {:.1} s (a run's rollouts pay it anyway)", t.elapsed().as_secs_f64());
    }
    if std::env::var("PROBE_SAMPLER_HEADS").is_ok_and(|v| v == "1") {
        // As in a run: the sampler prefills each policy prompt, and keeps its head.
        let t = Instant::now();
        let roles = learner.prompt_head_roles();
        learner.brain().keep_prompt_heads(&roles);
        for role in roles {
            let mut prompts: Vec<Vec<u32>> =
                batch.policy.iter().filter(|s| s.role == role).map(|s| s.prompt.clone()).collect();
            prompts.dedup();
            let per_call = std::env::var("PROBE_PREFILL_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
            for rows in prompts.chunks(per_call) {
                learner.brain().next_token_logits(role, rows).unwrap();
            }
        }
        learner.brain().keep_prompt_heads(&[]);
        eprintln!(
            "sampler's prompt prefill {:.1} s, {:.0} MiB of heads kept (a run's rollouts pay it anyway)",
            t.elapsed().as_secs_f64(),
            learner.brain_ref().kept_prompt_head_bytes() as f64 / (1 << 20) as f64
        );
    }
    eprintln!("peak before the update {:?} MiB, now {:?} MiB", onebrain_model::peak_rss_mib(), onebrain_model::rss_mib());
    eprintln!("heap before the update: live {:.0} MiB, peak {:.0} MiB", heap_mib().0, heap_mib().1);
    onebrain_model::reset_peak_rss();
    onebrain_model::reset_heap_peak();
    if std::env::var("PROBE_EVENTS").is_ok_and(|v| v == "1") {
        Events::start();
    }
    let t = Instant::now();
    let (cpu, steal) = (onebrain_model::cpu_seconds().unwrap_or(0.0), onebrain_model::steal_seconds().unwrap_or(0.0));
    let st = learner.update(&mut batch).unwrap();
    eprintln!("update {:.1} s (score {:.1}, Judge states {:.1}), tokens {}, steps {}, peak {:?} MiB, resident after it {:?} MiB", t.elapsed().as_secs_f64(), st.score_secs, st.judge_states_secs, st.tokens, st.steps, onebrain_model::peak_rss_mib(), onebrain_model::rss_mib());
    eprintln!("heap in the update: peak {:.0} MiB, live after it {:.0} MiB", heap_mib().1, heap_mib().0);
    Events::report();
    eprintln!(
        "update's CPU time {:.1} s; steal on the machine meanwhile {:.1} s (a timing with steal measures the neighbours too)",
        onebrain_model::cpu_seconds().unwrap_or(0.0) - cpu,
        onebrain_model::steal_seconds().unwrap_or(0.0) - steal
    );
}

/// The model crate's counting allocator, logging every large block's allocation and release
/// while [`Events`] records.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator::observed(Events::record);

/// Live and peak heap bytes since the last reset, in MiB.
fn heap_mib() -> (f64, f64) {
    (onebrain_model::heap_live_mib().unwrap_or(0.0), onebrain_model::heap_peak_mib().unwrap_or(0.0))
}

fn mib(b: usize) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// A log of the blocks of at least [`Events::LARGE`] bytes allocated and released while it
/// records (`PROBE_EVENTS=1`), in a buffer taken from `System` so that recording allocates
/// nothing: replayed afterwards, it says which blocks were live at the update's peak.
struct Events;

/// One block's allocation (`bytes > 0`) or release, and the live bytes just after it.
#[derive(Clone, Copy)]
struct Event {
    ptr: usize,
    bytes: i64,
    live: usize,
}

static EVENT_BUF: AtomicPtr<Event> = AtomicPtr::new(std::ptr::null_mut());
static EVENT_LEN: AtomicUsize = AtomicUsize::new(0);

impl Events {
    const LARGE: i64 = 256 << 10;
    const CAPACITY: usize = 1 << 22;

    fn start() {
        let layout = Layout::array::<Event>(Self::CAPACITY).expect("a small array");
        // SAFETY: a non-zero layout; the buffer is never freed (the probe exits after).
        let buf = unsafe { System.alloc(layout) } as *mut Event;
        assert!(!buf.is_null(), "the event buffer");
        EVENT_LEN.store(0, Ordering::SeqCst);
        EVENT_BUF.store(buf, Ordering::SeqCst);
    }

    fn record(ptr: *mut u8, bytes: i64, live: usize) {
        let buf = EVENT_BUF.load(Ordering::Relaxed);
        if buf.is_null() || bytes.abs() < Self::LARGE {
            return;
        }
        let k = EVENT_LEN.fetch_add(1, Ordering::Relaxed);
        if k < Self::CAPACITY {
            // SAFETY: slot `k` is in the buffer and written by this call alone.
            unsafe { buf.add(k).write(Event { ptr: ptr as usize, bytes, live }) };
        }
    }

    /// Stops recording and prints the blocks live at the highest recorded point, by size.
    fn report() {
        let buf = EVENT_BUF.swap(std::ptr::null_mut(), Ordering::SeqCst);
        if buf.is_null() {
            return;
        }
        let n = EVENT_LEN.load(Ordering::SeqCst).min(Self::CAPACITY);
        // SAFETY: the first `n` slots were written before recording stopped.
        let events = unsafe { std::slice::from_raw_parts(buf, n) };
        let Some(top) = (0..n).max_by_key(|&k| events[k].live) else { return };
        let mut live = std::collections::HashMap::new();
        for e in &events[..=top] {
            if e.bytes > 0 {
                live.insert(e.ptr, e.bytes);
            } else {
                live.remove(&e.ptr);
            }
        }
        let mut by_size: std::collections::BTreeMap<i64, usize> = Default::default();
        for &b in live.values() {
            *by_size.entry(b).or_default() += 1;
        }
        let large: i64 = live.values().sum();
        eprintln!(
            "at the peak (event {top} of {n}): live {:.0} MiB, of it {:.0} MiB in {} blocks allocated since recording began",
            mib(events[top].live),
            mib(large as usize),
            live.len()
        );
        let mut rows: Vec<(i64, usize)> = by_size.into_iter().collect();
        rows.sort_by_key(|&(b, c)| std::cmp::Reverse(b * c as i64));
        for (bytes, count) in rows.into_iter().take(40) {
            eprintln!("  {count:>5} x {bytes:>12} B = {:>7.1} MiB ({} f32)", mib(bytes as usize * count), bytes / 4);
        }
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One line of a training run's `episodes.jsonl` (the fields the probe reads).
#[derive(serde::Deserialize)]
struct EpisodeLine {
    group: usize,
    record: onebrain_roles::EpisodeRecord,
}

/// `(group, episode)` pairs from a training run's episode log or, failing that, an eval trace.
fn read_groups(path: &Path) -> Vec<(usize, onebrain_roles::EpisodeRecord)> {
    if let Ok(lines) = onebrain_eval::read_jsonl::<EpisodeLine>(path) {
        if !lines.records.is_empty() {
            return lines.records.into_iter().map(|l| (l.group, l.record)).collect();
        }
    }
    let records = onebrain_eval::read_trace(path).unwrap().records;
    records.into_iter().enumerate().map(|(i, r)| (i / 4, r)).collect()
}
