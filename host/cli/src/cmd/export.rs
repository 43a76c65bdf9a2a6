//! `onebrain export`: one role of a checkpoint, for transformers + PEFT or for llama.cpp.

use anyhow::Context;
use onebrain_model::{checkpoint_model_file, with_checkpoint_or_peft_shape, Brain, ExportFormat, ModelConfig, Role};

use crate::flags::ExportArgs;
use crate::out::outln;

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    let role: Role = args.role.parse()?;
    let format: ExportFormat = args.format.parse()?;
    let mut config = ModelConfig::default();
    if let Some(path) = args.model.clone().or_else(|| checkpoint_model_file(&args.checkpoint)) {
        config.path = path;
    }
    let config = with_checkpoint_or_peft_shape(&config, &args.checkpoint)
        .with_context(|| format!("cannot read the checkpoint {}", args.checkpoint.display()))?;
    let mut brain = Brain::load(&config).context("cannot load the model")?;
    brain
        .load_checkpoint_or_peft(&args.checkpoint, Some(role))
        .with_context(|| format!("cannot load the checkpoint {}", args.checkpoint.display()))?;
    let files = brain
        .export(role, format, &args.out)
        .with_context(|| format!("cannot write the export to {}", args.out.display()))?;
    for f in &files {
        outln!("{}", f.display())?;
    }
    outln!("{} README.md says how to load it", args.out.display())?;
    Ok(())
}
