//! PlanBench BlocksWorld (`blocksworld-4ops`), worded as PlanBench words it:
//! objects `a`, `b`, … are the red, blue, orange … block. `size` = blocks (2-20): PlanBench
//! names twelve colours, and blocks `m` to `t` take eight more.

use onebrain_sdk::text::PlanBenchWording;
use onebrain_sdk::{blocks, DomainAdapter, Result, Spec, Task};

const DOMAIN: &str = include_str!("../domain.pddl");
const DESCRIPTION: &str = include_str!("../description.txt");
#[derive(Default)]
pub struct Blocksworld;

impl DomainAdapter for Blocksworld {
    fn name(&self) -> String {
        "blocksworld".into()
    }
    fn description(&self) -> Result<String> {
        Ok(DESCRIPTION.into())
    }
    fn domain_pddl(&self) -> Result<String> {
        Ok(DOMAIN.into())
    }
    fn generate(&self, seed: u64, size: u32) -> Result<Task> {
        let problem = blocks::generate(&blocks::BLOCKSWORLD, &format!("BW-rand-{size}"), "blocksworld-4ops", seed, size)?;
        Ok(Task {
            id: format!("blocksworld/seed-{seed}-size-{size}"),
            domain: self.name(),
            text: self.describe(&problem)?,
            reference: Some(Spec { domain: DOMAIN.into(), problem }),
        })
    }
    fn describe(&self, problem_pddl: &str) -> Result<String> {
        PlanBenchWording { predicates: blocks::PLANBENCH_PREDICATES, object: &blocks::planbench_object }.statement(problem_pddl)
    }
}

onebrain_sdk::export_domain_adapter!(Blocksworld);
