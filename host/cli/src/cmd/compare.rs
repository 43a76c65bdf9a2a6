//! `onebrain compare`: training runs (arms) side by side on their held-out evaluations.

use anyhow::Context;
use onebrain_train::{arm_names, compare_curves, compare_table, ArmRun};

use crate::flags::CompareArgs;
use crate::out::outln;

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let names = arm_names(&args.runs);
    let arms = args
        .runs
        .iter()
        .zip(&names)
        .map(|(dir, name)| match &args.set {
            Some(set) => ArmRun::read_set(name, dir, set),
            None => ArmRun::read(name, dir),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let table = compare_table(&arms);
    outln!("{table}")?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        let path = out.join("arms.md");
        onebrain_durable::write_atomic(&path, &table)?;
        outln!("table:  {}", path.display())?;
        for (file, svg) in compare_curves(&arms) {
            let path = out.join(file);
            onebrain_durable::write_atomic(&path, svg)?;
            outln!("curves: {}", path.display())?;
        }
    }
    Ok(())
}
