use std::path::Path;

use onebrain_runtime::{escape_line, escape_path, CheckReport, RuntimeConfig};

use crate::cmd::print_json;
use crate::flags::{PluginsAction, PluginsArgs};

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
        eprintln!("onebrain: warning: {w}");
    }
    match args.action {
        PluginsAction::List => {
            let list = registry.list();
            if args.json {
                return print_json(&list);
            }
            if list.is_empty() {
                println!(
                    "no plugins found in {:?} (scripts/setup.sh builds the bundled ones)",
                    args.plugin_dirs
                );
            }
            for p in list {
                let built = if p.built {
                    ""
                } else {
                    "  (not built: run scripts/build-plugins.sh)"
                };
                println!(
                    "{:<22} {:<8} {:<21} {}{built}",
                    p.name,
                    p.version,
                    p.world.to_string(),
                    p.description
                );
            }
        }
        PluginsAction::Inspect { name } => {
            let d = registry.inspect(&name)?;
            if args.json {
                return print_json(&d);
            }
            println!("{} {} ({})", d.info.name, d.info.version, d.info.world);
            println!("  {}", d.info.description);
            println!("  manifest:    {}", escape_path(&d.manifest));
            println!("  component:   {}", escape_path(&d.info.component));
            if let (Some(bytes), Some(sha)) = (d.component_bytes, &d.sha256) {
                println!("  size:        {bytes} bytes, sha256 {sha}");
            }
            if let Some(e) = &d.component_error {
                println!("  refused:     {}", escape_line(e));
            }
            println!(
                "  api version: {}",
                d.api_version.as_deref().unwrap_or("unknown (not built?)")
            );
            println!("  permissions: {}", serde_json::to_string(&d.permissions)?);
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
                    print_check(r);
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

fn print_check(r: &CheckReport) {
    let status = if r.ok { "ok" } else { "FAILED" };
    println!("{} {} ({}): {status}", r.name, r.version, r.world);
    if let Some(e) = &r.error {
        // Escaped already by the runtime; escaping again is a no-op that
        // keeps this printer safe on its own.
        println!("  error: {}", escape_line(e));
    }
    let cache = r
        .cache
        .map(|c| format!("{c:?}").to_lowercase())
        .unwrap_or_else(|| "-".into());
    println!(
        "  load {:.2} ms (cache: {cache}), api {}",
        r.load_ms,
        r.api_version.as_deref().unwrap_or("?")
    );
    if r.ok {
        println!("  smoke: {} ({:.2} ms)", escape_line(&r.smoke), r.smoke_ms);
    }
    let l = &r.limits;
    println!(
        "  limits: {} ms per call, {} fuel, {} MiB memory, {} KiB output",
        l.timeout_ms, l.fuel, l.memory_mb, l.max_output_kb
    );
    let dirs: Vec<String> = r
        .preopens
        .iter()
        .map(|p| format!("{} at {}", escape_path(&p.host), escape_line(&p.guest)))
        .collect();
    println!(
        "  reads: {}",
        if dirs.is_empty() {
            "nothing".to_string()
        } else {
            dirs.join(", ")
        }
    );
}
