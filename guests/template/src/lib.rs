//! A new domain plugin, ready to fill in: a one-action "lights" domain
//! (switch every lamp on). Copy this folder, rename, replace.

use onebrain_sdk::pddl;
use onebrain_sdk::text::join_and;
use onebrain_sdk::{DomainAdapter, Result, Rng, Spec, Task};

const DOMAIN: &str = "(define (domain lights)
  (:predicates (off ?l) (on ?l))
  (:action switch-on :parameters (?l) :precondition (off ?l) :effect (and (on ?l) (not (off ?l)))))";

#[derive(Default)]
pub struct Lights;

impl DomainAdapter for Lights {
    fn name(&self) -> String {
        "lights".into()
    }

    fn description(&self) -> Result<String> {
        Ok("There are lamps. I can switch on a lamp that is off; then it is on.".into())
    }

    fn domain_pddl(&self) -> Result<String> {
        Ok(DOMAIN.into())
    }

    fn generate(&self, seed: u64, size: u32) -> Result<Task> {
        let mut rng = Rng::new(seed);
        let lamps: Vec<String> = (0..size.max(1)).map(|i| format!("l{i}")).collect();
        let init: Vec<String> = lamps.iter().map(|l| format!("({} {l})", ["off", "on"][rng.below(2)])).collect();
        let goal: Vec<String> = lamps.iter().map(|l| format!("(on {l})")).collect();
        let problem = format!(
            "(define (problem lights-{seed}) (:domain lights) (:objects {}) (:init {}) (:goal (and {})))",
            lamps.join(" "),
            init.join(" "),
            goal.join(" ")
        );
        let text = self.describe(&problem)?;
        Ok(Task { id: format!("lights/seed-{seed}-size-{size}"), domain: self.name(), text, reference: Some(Spec { domain: DOMAIN.into(), problem }) })
    }

    fn describe(&self, problem_pddl: &str) -> Result<String> {
        let p = pddl::parse_problem(problem_pddl).map_err(|e| e.to_string())?;
        let say = |a: &pddl::Atom| format!("lamp {} is {}", a.args.first().map_or("?", |t| t.name.as_str()), a.predicate);
        let init: Vec<String> = p.init.iter().map(say).collect();
        let goal: Vec<String> = p.goal.iter().map(|l| say(&l.atom)).collect();
        Ok(format!("Initially {}.\nMy goal is that {}.", join_and(&init), join_and(&goal)))
    }
}

onebrain_sdk::export_domain_adapter!(Lights);
