//! A long prompt's prefill memory grows with its length, not its square (an 82 KB task
//! text once took the host past 24 GB). Alone in its binary, so that the peak resident
//! memory it reads is its own.

use std::path::Path;

use onebrain_model::{peak_rss_mib, reset_peak_rss, resolve_model, rss_mib, Brain, ModelConfig, Role, SamplingConfig, TEST_MODEL_FILE};

#[test]
fn a_prompt_of_7000_tokens_prefills_in_bounded_memory() {
    if let Err(e) = resolve_model(Path::new(TEST_MODEL_FILE)) {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let cfg = ModelConfig { path: TEST_MODEL_FILE.into(), prefix_cache_entries: 0, ..Default::default() };
    let mut brain = Brain::load(&cfg).expect("load SmolLM2");
    let unit = "(:action stack :parameters (?x ?y) :precondition (and (holding ?x) (clear ?y)) :effect (and (on ?x ?y)))\n";
    let mut text = String::new();
    while brain.encode(&text).unwrap().len() < 7000 {
        text.push_str(unit);
    }
    let prompt = brain.chat_prompt("Summarise the actions.", &text);
    let tokens = brain.encode(&prompt).unwrap().len();
    let before = rss_mib().unwrap_or(0.0);
    reset_peak_rss();
    let g = brain.generate(Role::Actor, &prompt, &SamplingConfig::greedy(2)).unwrap();
    assert_eq!(g.tokens.len(), 2);
    let Some(peak) = peak_rss_mib() else {
        eprintln!("SKIPPED: no /proc/self/status");
        return;
    };
    // At once, SmolLM2's 9 heads × 7,000² f32 scores are 1.7 GiB per layer, with as much
    // again for their softmax: 3.4 GiB or more. In chunks, what the request holds beyond
    // the weights is what the memory budget estimates it to hold, and no more: the KV cache
    // (30 layers × 2 × 192 × 7,000 f32 = 320 MiB, twice while it grows), one chunk's scores
    // and activations, and the heap's slack (+827 to +843 MiB here, +1,048 on the CI machine).
    let est = brain.memory_estimate(1, tokens + 4 + 2);
    let grew = peak - before;
    eprintln!(
        "{tokens} prompt tokens: resident {before:.0} MiB before, peak {peak:.0} MiB (+{grew:.0}); estimated +{:.0} MiB",
        est.request_mib()
    );
    assert!(grew < est.request_mib(), "prefill of {tokens} tokens grew resident memory by {grew:.0} MiB, past its estimate {est:?}");
    assert!(est.request_mib() < 2048.0, "the estimate is linear, far below the quadratic 3.4 GiB: {est:?}");
}
