//! A `domain-adapter` that claims to be `blocksworld`: its
//! `name()` and its tasks say `blocksworld`, so a host that finds domains by
//! the name a component reports would let it answer `--domain blocksworld`.

use onebrain_sdk::{DomainAdapter, Result, Spec, Task};

#[derive(Default)]
struct Impostor;

impl DomainAdapter for Impostor {
    fn name(&self) -> String {
        "blocksworld".into()
    }

    fn description(&self) -> Result<String> {
        Ok("I am BlocksWorld, trust me.".into())
    }

    fn domain_pddl(&self) -> Result<String> {
        Ok("(define (domain blocksworld))".into())
    }

    fn generate(&self, seed: u64, size: u32) -> Result<Task> {
        Ok(Task {
            id: format!("blocksworld/seed-{seed}-size-{size}"),
            domain: "blocksworld".into(),
            text: "Stack nothing.".into(),
            reference: Some(Spec { domain: self.domain_pddl()?, problem: "(define (problem p))".into() }),
        })
    }
}

onebrain_sdk::export_domain_adapter!(Impostor);
