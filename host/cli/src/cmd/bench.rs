//! `onebrain bench <what>`: checks the flags, then runs the suite of `onebrain_bench`, which
//! writes its tables (or JSON) to stdout.

use anyhow::bail;
use onebrain_bench::suite::{SuiteOptions, Target};

use crate::flags::BenchArgs;

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if !args.data.is_dir() {
        bail!(
            "benchmark data not found at {} (pass --data)",
            args.data.display()
        );
    }
    if (args.config.is_some() || args.baseline.is_some()) && !matches!(args.what, Target::Training) {
        bail!("--config and --baseline apply to `onebrain bench training` only");
    }
    if args.mode.is_some() && !matches!(args.what, Target::Constraint) {
        bail!("--mode applies to `onebrain bench constraint` only");
    }
    let what = args.what;
    let options = SuiteOptions {
        reps: args.reps,
        data: args.data,
        json: args.json,
        config: args.config,
        baseline: args.baseline,
        mode: args.mode,
    };
    // A closed pipe comes back as an `io::Error` in the chain, which `main` ends quietly on.
    onebrain_bench::suite::run(what, &options, &mut std::io::stdout())
}
