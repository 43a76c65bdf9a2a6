//! PlanBench Mystery BlocksWorld (`mystery-4ops`): BlocksWorld under
//! obfuscated names (craves = on, planet = ontable, province = clear,
//! harmony = handempty, pain = holding), worded as PlanBench words it.
//! `size` = objects (2-12).

use onebrain_sdk::text::PlanBenchWording;
use onebrain_sdk::{blocks, DomainAdapter, Result, Spec, Task};

const DOMAIN: &str = include_str!("../domain.pddl");
const DESCRIPTION: &str = include_str!("../description.txt");
/// PlanBench's `predicates` templates (configs/mystery_blocksworld.yaml).
const PREDICATES: &[(&str, &str)] = &[
    ("planet", "planet {}"),
    ("province", "province {}"),
    ("harmony", "harmony"),
    ("craves", "{} craves {}"),
    ("pain", "pain {}"),
];

fn object(name: &str) -> String {
    format!("object {name}")
}

#[derive(Default)]
pub struct Mystery;

impl DomainAdapter for Mystery {
    fn name(&self) -> String {
        "mystery-blocksworld".into()
    }
    fn description(&self) -> Result<String> {
        Ok(DESCRIPTION.into())
    }
    fn domain_pddl(&self) -> Result<String> {
        Ok(DOMAIN.into())
    }
    fn generate(&self, seed: u64, size: u32) -> Result<Task> {
        let problem = blocks::generate(&blocks::MYSTERY, &format!("MY-rand-{size}"), "mystery-4ops", seed, size)?;
        Ok(Task {
            id: format!("mystery-blocksworld/seed-{seed}-size-{size}"),
            domain: self.name(),
            text: self.describe(&problem)?,
            reference: Some(Spec { domain: DOMAIN.into(), problem }),
        })
    }
    fn describe(&self, problem_pddl: &str) -> Result<String> {
        PlanBenchWording { predicates: PREDICATES, object: &object }.statement(problem_pddl)
    }
}

onebrain_sdk::export_domain_adapter!(Mystery);
