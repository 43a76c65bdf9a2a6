use std::path::Path;

use onebrain_core::{Reward, Rewards};
use onebrain_roles::{finished_episode, EpisodeConfig, Strategy};
use onebrain_runtime::{escape_line, escape_path, CheckReport, RuntimeConfig};

use crate::cmd::print_json;
use crate::flags::{PluginsAction, PluginsArgs};
use crate::out::{errln, outln};

pub fn run(args: PluginsArgs) -> anyhow::Result<()> {
    let config = RuntimeConfig {
        plugin_dirs: args.plugin_dirs.clone(),
        cache_dir: Some(args.cache_dir.clone()),
        ..RuntimeConfig::default()
    };
    let (host, registry) = config.host(Path::new("."))?;
    // A plugin folder that cannot be used is skipped, not fatal: say which.
    let skipped = registry.warnings();
    for w in &skipped {
        errln!("onebrain: warning: {w}");
    }
    match args.action {
        PluginsAction::Rescore { trace, rewards } => return rescore(&config, &trace, &rewards, args.json),
        PluginsAction::List => {
            let list = registry.list();
            if args.json {
                return print_json(&list);
            }
            if list.is_empty() {
                outln!(
                    "no plugins found in {:?} (scripts/setup.sh builds the bundled ones)",
                    args.plugin_dirs
                )?;
            }
            for p in list {
                let built = if p.built {
                    ""
                } else {
                    "  (not built: run scripts/build-plugins.sh)"
                };
                outln!(
                    "{:<22} {:<8} {:<21} {}{built}",
                    p.name,
                    p.version,
                    p.world.to_string(),
                    p.description
                )?;
            }
        }
        PluginsAction::Inspect { name } => {
            let d = registry.inspect(&name)?;
            if args.json {
                return print_json(&d);
            }
            outln!("{} {} ({})", d.info.name, d.info.version, d.info.world)?;
            outln!("  {}", d.info.description)?;
            outln!("  manifest:    {}", escape_path(&d.manifest))?;
            outln!("  component:   {}", escape_path(&d.info.component))?;
            if let (Some(bytes), Some(sha)) = (d.component_bytes, &d.sha256) {
                outln!("  size:        {bytes} bytes, sha256 {sha}")?;
            }
            if let Some(e) = &d.component_error {
                outln!("  refused:     {}", escape_line(e))?;
            }
            outln!(
                "  api version: {}",
                d.api_version.as_deref().unwrap_or("unknown (not built?)")
            )?;
            outln!("  permissions: {}", serde_json::to_string(&d.permissions)?)?;
        }
        PluginsAction::Check { name } => {
            let all = name.is_none();
            let names: Vec<String> = match name {
                Some(n) => vec![n],
                None => registry.list().into_iter().map(|p| p.name).collect(),
            };
            let reports = names
                .iter()
                .map(|n| registry.check(&host, n))
                .collect::<Result<Vec<CheckReport>, _>>()?;
            if args.json {
                print_json(&reports)?;
            } else {
                for r in &reports {
                    print_check(r)?;
                }
            }
            // A gate for scripts: any failure, or a skipped folder when
            // checking everything, exits non-zero.
            let failed: Vec<&str> = reports
                .iter()
                .filter(|r| !r.ok)
                .map(|r| r.name.as_str())
                .collect();
            if !failed.is_empty() {
                anyhow::bail!(
                    "{} of {} plugins failed the check: {}",
                    failed.len(),
                    reports.len(),
                    failed.join(", ")
                );
            }
            if all && !skipped.is_empty() {
                anyhow::bail!(
                    "{} plugin folders were skipped (see the warnings above)",
                    skipped.len()
                );
            }
        }
    }
    Ok(())
}

fn print_check(r: &CheckReport) -> std::io::Result<()> {
    let status = if r.ok { "ok" } else { "FAILED" };
    outln!("{} {} ({}): {status}", r.name, r.version, r.world)?;
    if let Some(e) = &r.error {
        // Escaped already by the runtime; escaping again is a no-op that
        // keeps this printer safe on its own.
        outln!("  error: {}", escape_line(e))?;
    }
    let cache = r
        .cache
        .map(|c| format!("{c:?}").to_lowercase())
        .unwrap_or_else(|| "-".into());
    outln!(
        "  load {:.2} ms (cache: {cache}), api {}",
        r.load_ms,
        r.api_version.as_deref().unwrap_or("?")
    )?;
    if r.ok {
        outln!("  smoke: {} ({:.2} ms)", escape_line(&r.smoke), r.smoke_ms)?;
    }
    let l = &r.limits;
    outln!(
        "  limits: {} ms per call, {} fuel, {} MiB memory ({} MiB of address space), {} KiB output",
        l.timeout_ms,
        l.fuel,
        l.memory_mb,
        l.address_space_bytes() >> 20,
        l.max_output_kb
    )?;
    let dirs: Vec<String> = r
        .preopens
        .iter()
        .map(|p| format!("{} at {}", escape_path(&p.host), escape_line(&p.guest)))
        .collect();
    outln!(
        "  reads: {}",
        if dirs.is_empty() {
            "nothing".to_string()
        } else {
            dirs.join(", ")
        }
    )
}

/// Means of one reward's terms over the rescored episodes.
#[derive(Debug, Default, serde::Serialize)]
struct RewardMeans {
    reward: String,
    episodes: usize,
    /// Mean R_A.
    actor: f64,
    /// Mean R_E over the episodes with a repair.
    editor: Option<f64>,
    /// Mean Judge reward.
    judge: f64,
    /// Episodes where this reward's R_A differs from the one the trace recorded.
    actor_differs: usize,
    /// Plugin errors, each naming the episode.
    errors: Vec<String>,
}

/// `onebrain plugins rescore`: the multi-role episodes of a trace under other rewards.
pub(crate) fn rescore(config: &RuntimeConfig, trace: &Path, rewards: &[String], json: bool) -> anyhow::Result<()> {
    let contents = onebrain_eval::read_trace(trace)?;
    let episodes: Vec<_> = contents
        .records
        .iter()
        .filter(|r| r.strategy == Strategy::MultiRole && r.error.is_none())
        .collect();
    let cfg = EpisodeConfig::default();
    let mut out = Vec::new();
    for name in rewards {
        let plugins = RuntimeConfig { reward: Some(name.clone()), ..config.clone() }.load(Path::new("."))?;
        let reward = plugins.reward.expect("a reward was named");
        let mut m = RewardMeans { reward: name.clone(), episodes: episodes.len(), ..Default::default() };
        let (mut editor_sum, mut editor_n) = (0.0, 0usize);
        for rec in &episodes {
            match reward.rewards(&finished_episode(rec, &cfg)) {
                Ok(r) => {
                    m.actor += f64::from(r.actor);
                    m.judge += f64::from(r.judge);
                    if rec.repairs > 0 {
                        editor_sum += f64::from(r.editor);
                        editor_n += 1;
                    }
                    let recorded = rec.rewards.as_ref().map(|r: &Rewards| r.actor);
                    m.actor_differs += usize::from(recorded.is_some_and(|a| (a - r.actor).abs() > 1e-6));
                }
                Err(e) => m.errors.push(format!("{}: {e}", rec.task_id)),
            }
        }
        let scored = (m.episodes - m.errors.len()).max(1) as f64;
        (m.actor, m.judge) = (m.actor / scored, m.judge / scored);
        m.editor = (editor_n > 0).then(|| editor_sum / editor_n as f64);
        out.push(m);
    }
    if json {
        return print_json(&out);
    }
    outln!("{} multi-role episodes of {} (the paper's weights: λ_J 0.3, β 0.1, τ 0.5)", episodes.len(), escape_path(trace))?;
    outln!("{:<22} {:>8} {:>8} {:>8} {:>14} {:>7}", "reward", "mean R_A", "mean R_E", "mean R_J", "R_A ≠ recorded", "errors")?;
    for m in &out {
        let editor = m.editor.map_or("-".into(), |e| format!("{e:.3}"));
        outln!(
            "{:<22} {:>8.3} {:>8} {:>8.3} {:>14} {:>7}",
            escape_line(&m.reward),
            m.actor,
            editor,
            m.judge,
            m.actor_differs,
            m.errors.len()
        )?;
        for e in &m.errors {
            errln!("onebrain: {}", escape_line(e));
        }
    }
    Ok(())
}
