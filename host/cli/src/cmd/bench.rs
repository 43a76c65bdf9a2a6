use anyhow::{anyhow, bail};

use crate::cmd::print_json;
use crate::flags::{BenchArgs, BenchTarget};

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if !args.data.is_dir() {
        bail!(
            "benchmark data not found at {} (pass --data)",
            args.data.display()
        );
    }
    match args.what {
        BenchTarget::Verifier => {
            let report =
                onebrain_bench::verifier::run(&args.data, args.reps).map_err(|e| anyhow!(e))?;
            if args.json {
                return print_json(&report);
            }
            println!(
                "## Verifier (onebrain bench verifier --reps {})\n",
                args.reps
            );
            print!("{}", report.table());
        }
    }
    Ok(())
}
