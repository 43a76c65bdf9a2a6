//! VAL-equivalent plan validation: simulate a plan step by step on the (domain, problem) pair.

use serde::{Deserialize, Serialize};

use crate::ast::{Domain, Plan, Problem};
use crate::world::{instantiate, key_name, resolve, Interner, World};

/// The outcome of [`validate`]; the JSON of `onebrain validate --json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationReport {
    /// True if every step was applicable and the goal holds at the end.
    pub valid: bool,
    /// How many steps the plan has.
    pub steps: usize,
    /// The first step (1-based) that could not be applied, if any.
    pub failed_step: Option<usize>,
    /// Why the plan is (in)valid, in one sentence.
    pub reason: String,
    /// The precondition literals unsatisfied at `failed_step`, or the goal literals unsatisfied
    /// at the end, as `(clear b)` / `(not (on a b))`.
    pub unsatisfied: Vec<String>,
}

impl ValidationReport {
    fn fail(
        steps: usize,
        step: Option<usize>,
        reason: String,
        unsatisfied: Vec<String>,
    ) -> ValidationReport {
        ValidationReport {
            valid: false,
            steps,
            failed_step: step,
            reason,
            unsatisfied,
        }
    }
}

/// A growable set of atoms for simulation: unlike grounding, validation must follow any plan,
/// including steps whose atoms were never interned.
struct SimState {
    atoms: Interner,
    holds: Vec<bool>,
    key: Vec<u32>,
}

impl SimState {
    fn id(&mut self, key: &[u32]) -> usize {
        let (id, new) = self.atoms.intern(key);
        if new {
            self.holds.push(false);
        }
        id as usize
    }

    fn holds(&self, key: &[u32]) -> bool {
        self.atoms
            .get(key)
            .is_some_and(|id| self.holds[id as usize])
    }
}

/// Applies `plan` to `problem`'s initial state and checks the goal, as VAL does: each step's
/// action must exist, take that many arguments, name declared objects of the right types, and
/// have its precondition satisfied; effects apply deletes first, then adds. The first failing
/// step stops the simulation. An ill-formed spec (undeclared names) gives an invalid report
/// whose reason names the problem.
pub fn validate(domain: &Domain, problem: &Problem, plan: &Plan) -> ValidationReport {
    let n = plan.steps.len();
    let world = match World::new(domain, problem) {
        Ok(w) => w,
        Err(e) => {
            return ValidationReport::fail(
                n,
                None,
                format!("the spec is ill-formed: {e}"),
                Vec::new(),
            )
        }
    };
    let mut st = SimState {
        atoms: Interner::default(),
        holds: Vec::new(),
        key: Vec::new(),
    };
    let mut key = Vec::new();
    for a in &problem.init {
        match world.ground_atom(a, &mut key) {
            Ok(pred) => {
                key.insert(0, pred);
                let id = st.id(&key);
                st.holds[id] = true;
            }
            Err(e) => {
                return ValidationReport::fail(
                    n,
                    None,
                    format!("the spec is ill-formed: {e}"),
                    Vec::new(),
                )
            }
        }
    }
    let name = |key: &[u32]| key_name(&world.preds, &world.objects, key);
    let mut binding = Vec::new();
    let mut ids = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        let k = i + 1;
        let Some(ai) = domain.actions.iter().position(|a| a.name == step.action) else {
            return ValidationReport::fail(
                n,
                Some(k),
                format!("step {k} {step}: unknown action `{}`", step.action),
                Vec::new(),
            );
        };
        let schema = &domain.actions[ai];
        let cs = &world.actions[ai];
        if step.args.len() != schema.params.len() {
            return ValidationReport::fail(
                n,
                Some(k),
                format!(
                    "step {k} {step}: action `{}` takes {} arguments, got {}",
                    schema.name,
                    schema.params.len(),
                    step.args.len()
                ),
                Vec::new(),
            );
        }
        binding.clear();
        for (j, arg) in step.args.iter().enumerate() {
            let Some(&o) = world.object_index.get(arg.as_str()) else {
                return ValidationReport::fail(
                    n,
                    Some(k),
                    format!("step {k} {step}: unknown object `{arg}`"),
                    Vec::new(),
                );
            };
            let (ot, pt) = (world.object_type[o as usize], cs.params[j]);
            if !world.types.is_subtype(ot, pt) {
                return ValidationReport::fail(
                    n,
                    Some(k),
                    format!(
                        "step {k} {step}: object `{arg}` has type `{}`, but parameter `{}` of `{}` needs `{}`",
                        world.types.name(ot),
                        schema.params[j].name,
                        schema.name,
                        world.types.name(pt)
                    ),
                    Vec::new(),
                );
            }
            binding.push(o);
        }
        let mut unsatisfied = Vec::new();
        for (pos, atom) in &cs.pre {
            instantiate(atom, &binding, &mut st.key);
            if st.holds(&st.key) != *pos {
                let s = name(&st.key);
                unsatisfied.push(if *pos { s } else { format!("(not {s})") });
            }
        }
        for &(pos, a, b) in &cs.eq {
            let (a, b) = (resolve(a, &binding), resolve(b, &binding));
            if (a == b) != pos {
                let s = format!(
                    "(= {} {})",
                    world.objects[a as usize], world.objects[b as usize]
                );
                unsatisfied.push(if pos { s } else { format!("(not {s})") });
            }
        }
        if !unsatisfied.is_empty() {
            return ValidationReport::fail(
                n,
                Some(k),
                format!("step {k} {step}: precondition not satisfied"),
                unsatisfied,
            );
        }
        // Deletes first, then adds; ids are collected before any change so that an atom both
        // deleted and added ends up true.
        ids.clear();
        for atom in &cs.del {
            instantiate(atom, &binding, &mut key);
            ids.push(st.id(&key));
        }
        for &id in &ids {
            st.holds[id] = false;
        }
        for atom in &cs.add {
            instantiate(atom, &binding, &mut key);
            let id = st.id(&key);
            st.holds[id] = true;
        }
    }
    let mut unsatisfied = Vec::new();
    for l in &problem.goal {
        let text = l.to_string();
        let holds = if l.atom.is_equality() {
            match world.equality(&l.atom) {
                Ok((a, b)) => a == b,
                Err(e) => {
                    return ValidationReport::fail(
                        n,
                        None,
                        format!("the spec is ill-formed: {e}"),
                        Vec::new(),
                    )
                }
            }
        } else {
            match world.ground_atom(&l.atom, &mut key) {
                Ok(pred) => {
                    key.insert(0, pred);
                    st.holds(&key)
                }
                Err(e) => {
                    return ValidationReport::fail(
                        n,
                        None,
                        format!("the spec is ill-formed: {e}"),
                        Vec::new(),
                    )
                }
            }
        };
        if holds != l.positive {
            unsatisfied.push(text);
        }
    }
    if unsatisfied.is_empty() {
        ValidationReport {
            valid: true,
            steps: n,
            failed_step: None,
            reason: format!("plan is valid: the goal holds after {n} steps"),
            unsatisfied,
        }
    } else {
        ValidationReport::fail(
            n,
            None,
            format!("goal not satisfied after {n} steps"),
            unsatisfied,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::{parse_domain, parse_plan, parse_problem};

    const BW: &str = "(define (domain bw) (:requirements :typing :negative-preconditions) (:types block)
  (:predicates (on ?x - block ?y - block) (ontable ?x - block) (clear ?x - block) (handempty) (holding ?x - block))
  (:action pick-up :parameters (?x - block) :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (holding ?x) (not (ontable ?x)) (not (clear ?x)) (not (handempty))))
  (:action put-down :parameters (?x - block) :precondition (and (holding ?x) (not (handempty)))
    :effect (and (ontable ?x) (clear ?x) (handempty) (not (holding ?x))))
  (:action stack :parameters (?x ?y - block) :precondition (and (holding ?x) (clear ?y))
    :effect (and (on ?x ?y) (clear ?x) (handempty) (not (holding ?x)) (not (clear ?y))))
  (:action unstack :parameters (?x ?y - block) :precondition (and (on ?x ?y) (clear ?x) (handempty))
    :effect (and (holding ?x) (clear ?y) (not (on ?x ?y)) (not (clear ?x)) (not (handempty)))))";

    const P: &str = "(define (problem p) (:domain bw) (:objects a b c - block t - object)
  (:init (clear a) (on a b) (ontable b) (clear c) (ontable c) (handempty)) (:goal (and (on c a) (on a b))))";

    fn run(plan: &str) -> ValidationReport {
        validate(
            &parse_domain(BW).unwrap(),
            &parse_problem(P).unwrap(),
            &parse_plan(plan).unwrap(),
        )
    }

    #[test]
    fn a_valid_plan() {
        let r = run("(pick-up c)\n(stack c a)\n; cost = 2 (unit cost)\n");
        assert!(r.valid, "{r:?}");
        assert_eq!((r.steps, r.failed_step), (2, None));
        assert!(r.unsatisfied.is_empty());
    }

    #[test]
    fn the_first_failing_precondition_is_reported_with_its_literals() {
        let r = run("(pick-up c)\n(stack c a)\n(pick-up b)\n");
        assert!(!r.valid);
        assert_eq!(r.failed_step, Some(3));
        assert_eq!(r.unsatisfied, ["(clear b)"]);
        assert!(r.reason.contains("step 3 (pick-up b)"), "{}", r.reason);

        let r = run("(pick-up c)\n(put-down c)\n(put-down c)");
        assert_eq!(r.failed_step, Some(3));
        assert_eq!(r.unsatisfied, ["(holding c)", "(not (handempty))"]);
    }

    #[test]
    fn a_plan_that_misses_the_goal() {
        let r = run("(pick-up c)");
        assert!(!r.valid);
        assert_eq!(r.failed_step, None);
        assert_eq!(r.unsatisfied, ["(on c a)"]);
        assert!(
            r.reason.contains("goal not satisfied after 1 steps"),
            "{}",
            r.reason
        );
    }

    #[test]
    fn unknown_actions_objects_arity_and_types_fail_at_their_step() {
        let r = run("(pick-up c)\n(fly c a)");
        assert_eq!(r.failed_step, Some(2));
        assert!(r.reason.contains("unknown action `fly`"), "{}", r.reason);
        let r = run("(pick-up c a)");
        assert_eq!(r.failed_step, Some(1));
        assert!(
            r.reason.contains("takes 1 arguments, got 2"),
            "{}",
            r.reason
        );
        let r = run("(pick-up z)");
        assert!(r.reason.contains("unknown object `z`"), "{}", r.reason);
        let r = run("(pick-up t)");
        assert!(
            r.reason.contains(
                "object `t` has type `object`, but parameter `?x` of `pick-up` needs `block`"
            ),
            "{}",
            r.reason
        );
    }

    #[test]
    fn ill_formed_specs_give_a_reason_not_a_panic() {
        let p = parse_problem("(define (problem p) (:domain bw) (:objects a - block) (:init (clear q)) (:goal (clear a)))").unwrap();
        let r = validate(
            &parse_domain(BW).unwrap(),
            &p,
            &parse_plan("(pick-up a)").unwrap(),
        );
        assert!(
            !r.valid && r.reason.contains("ill-formed") && r.reason.contains("`q`"),
            "{}",
            r.reason
        );
    }

    #[test]
    fn report_serialises_with_the_cli_field_names() {
        let v = serde_json::to_value(run("(pick-up b)")).unwrap();
        assert_eq!(v["valid"], false);
        assert_eq!(v["failed_step"], 1);
        assert_eq!(v["steps"], 1);
        assert_eq!(v["unsatisfied"][0], "(clear b)");
    }
}
