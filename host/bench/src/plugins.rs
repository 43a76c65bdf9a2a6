//! `onebrain bench plugins`: what a plugin call costs.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use onebrain_sdk::text::PlanBenchWording;
use serde::Serialize;

use onebrain_core::FinishedEpisode;
use onebrain_runtime::{HostOptions, InstancePolicy, PluginHost, PluginRegistry, RegistryError, WasmDomainAdapter, WasmReward};

/// What to measure with.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The folder of installed plugins (needs `paper-rewards` and `blocksworld` built).
    pub plugins_dir: PathBuf,
    /// Calls per measurement.
    pub iterations: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions { plugins_dir: PathBuf::from("plugins"), iterations: 2000 }
    }
}

/// The figures, each the median over `iterations` calls (loads: over 5).
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// `paper-rewards` call on a kept instance, µs.
    pub reward_call_reused_us: f64,
    /// `paper-rewards` call on a fresh store + instance from `InstancePre`, µs.
    pub reward_call_fresh_us: f64,
    /// Loading `blocksworld` with Cranelift compilation (no cache), ms.
    pub load_uncached_ms: f64,
    /// Loading `blocksworld` from the precompiled cache, ms.
    pub load_cached_ms: f64,
    /// `blocksworld` `generate(seed, 12)` through WASM (call included), µs.
    pub generate_wasm_us: f64,
    /// The same SDK code (`blocks::generate` + PlanBench wording) natively, µs.
    pub generate_native_us: f64,
    /// `generate_wasm_us / generate_native_us` (target ≤ 2).
    pub generate_ratio: f64,
    /// `blocksworld` `describe` of a 12-block problem through WASM, µs.
    pub describe_wasm_us: f64,
    /// The same describe natively, µs.
    pub describe_native_us: f64,
    /// `describe_wasm_us / describe_native_us` (target ≤ 2).
    pub describe_ratio: f64,
    /// Calls per measurement.
    pub iterations: usize,
}

fn median_us(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v.get(v.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

fn time_each(n: usize, mut f: impl FnMut(usize)) -> f64 {
    // Warm caches and the instance first, so the median is the steady state.
    for i in 0..n.min(50) {
        f(i);
    }
    median_us(
        (0..n)
            .map(|i| {
                let t = Instant::now();
                f(i);
                t.elapsed()
            })
            .collect(),
    )
}

fn native_generate(seed: u64, size: u32) -> (String, String) {
    let blocks = onebrain_sdk::blocks::generate(
        &onebrain_sdk::blocks::BLOCKSWORLD,
        &format!("BW-rand-{size}"),
        "blocksworld-4ops",
        seed,
        size,
    )
    .expect("valid size");
    let text = PlanBenchWording { predicates: onebrain_sdk::blocks::PLANBENCH_PREDICATES, object: &onebrain_sdk::blocks::planbench_object }.statement(&blocks).expect("parses");
    (blocks, text)
}

/// Runs every measurement. Needs `paper-rewards` and `blocksworld` built in
/// `plugins_dir`; compiles into a temporary cache it removes afterwards.
pub fn bench_plugins(options: &BenchOptions) -> Result<BenchReport, RegistryError> {
    let n = options.iterations.max(10);
    let registry = PluginRegistry::discover(&[options.plugins_dir.clone()])?;
    let cache = tempfile::tempdir().map_err(|source| RegistryError::Io { path: std::env::temp_dir(), source })?;
    let host = PluginHost::new(HostOptions { cache_dir: Some(cache.path().to_path_buf()), ..Default::default() })
        .map_err(|e| RegistryError::Manifest { path: options.plugins_dir.clone(), message: e })?;

    let reward_m = registry.get("paper-rewards")?;
    let reward_p = host.load(reward_m)?;
    let ep = FinishedEpisode::with_outcomes(&[false, false, true], 0.7);
    let reused = WasmReward::new(&reward_p, InstancePolicy::Reuse)?;
    let fresh = WasmReward::new(&reward_p, InstancePolicy::FreshPerCall)?;
    let reward_call_reused_us = time_each(n, |_| {
        reused.try_rewards(&ep).expect("paper-rewards answers");
    });
    let reward_call_fresh_us = time_each(n.min(500), |_| {
        fresh.try_rewards(&ep).expect("paper-rewards answers");
    });

    let bw_m = registry.get("blocksworld")?;
    let uncached = PluginHost::new(HostOptions::default())
        .map_err(|e| RegistryError::Manifest { path: options.plugins_dir.clone(), message: e })?;
    let mut loads = Vec::new();
    for _ in 0..3 {
        loads.push(uncached.load(bw_m)?.load_time);
    }
    let load_uncached_ms = median_us(loads) / 1e3;
    host.load(bw_m)?; // fills the cache
    let mut loads = Vec::new();
    for _ in 0..5 {
        loads.push(host.load(bw_m)?.load_time);
    }
    let load_cached_ms = median_us(loads) / 1e3;

    let bw = WasmDomainAdapter::new(&host.load(bw_m)?, InstancePolicy::Reuse)?;
    let generate_wasm_us = time_each(n, |i| {
        bw.try_generate(i as u64, 12).expect("blocksworld generates");
    });
    let generate_native_us = time_each(n, |i| {
        std::hint::black_box(native_generate(i as u64, 12));
    });
    let problems: Vec<String> = (0..64).map(|s| native_generate(s, 12).0).collect();
    let describe_wasm_us = time_each(n, |i| {
        bw.try_describe(&problems[i % problems.len()]).expect("blocksworld describes");
    });
    let wording = PlanBenchWording { predicates: onebrain_sdk::blocks::PLANBENCH_PREDICATES, object: &onebrain_sdk::blocks::planbench_object };
    let describe_native_us = time_each(n, |i| {
        std::hint::black_box(wording.statement(&problems[i % problems.len()]).expect("parses"));
    });

    Ok(BenchReport {
        reward_call_reused_us,
        reward_call_fresh_us,
        load_uncached_ms,
        load_cached_ms,
        generate_wasm_us,
        generate_native_us,
        generate_ratio: generate_wasm_us / generate_native_us,
        describe_wasm_us,
        describe_native_us,
        describe_ratio: describe_wasm_us / describe_native_us,
        iterations: n,
    })
}
