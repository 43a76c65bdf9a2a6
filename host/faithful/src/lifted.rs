//! A domain's own mutex groups, lifted: "at most one of these atoms holds", for every task of
//! the domain whatever its objects and initial state, read off the action schemas with no
//! annotation. A decoder can then refuse an initial state that states two atoms of one group
//! (BlocksWorld's `(holding a)` beside `(handempty)`): no plan starts there in the domain's
//! own terms.
//!
//! [`crate::invariant`] proves groups per ground task: the base case on the initial state,
//! the induction step over the ground actions. The induction step depends only on the actions
//! and the objects, so it is checked here once per domain, on a *probe* task: `k` fresh
//! objects of each declared type (and of `object`), `k` one more than the most objects that an
//! action and a group instance can name together, and every well-typed atom in the initial
//! state, so that relaxed grounding keeps every action (each static precondition holds).
//! An (instance, action) pair of any real task names at most `k - 1` objects besides the
//! domain's constants, so the probe holds a pair like it up to renaming, with a spare object
//! of each type for the atoms the action leaves alone; and a real task's actions are a subset
//! of the probe's under that renaming. A candidate every probe instance of which passes the
//! induction step thus passes it in every task. The base case is the decoder's to enforce.
//!
//! A negative precondition over a static predicate would drop probe actions a real task keeps:
//! such a domain gets no groups, as does one whose probe would be too large to ground.

use onebrain_pddl::{ground, parse_problem, Domain, OBJECT};

use crate::invariant::{atom_index, candidates, induction, Part};
use crate::model::Model;

/// Probe tasks with more initial atoms than this are not built (the bundled domains need a
/// few thousand; Logistics, 4-ary `drive-truck` over 7 objects, about 2,500).
const MAX_PROBE_ATOMS: u128 = 200_000;

/// One predicate's share of a lifted group.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupPart {
    /// The predicate, lower-case as the parser reads it.
    pub predicate: String,
    /// The argument positions that hold the group's parameters, in the group's order.
    pub params: Vec<usize>,
    /// The argument position left free (counted), if any.
    pub counted: Option<usize>,
}

/// A lifted mutex group. For each choice of values for its parameters, at most one atom
/// holds in any reachable state among the atoms of its parts whose `params` positions carry
/// those values: BlocksWorld's `{(on ?x *), (holding ?x), (ontable ?x)}`, each block on at
/// most one thing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutexGroup {
    /// Its parts, sorted, one per predicate.
    pub parts: Vec<GroupPart>,
}

/// The mutex groups of `domain` that hold in every task of it, up to the initial state (see
/// the module docs), without the groups that a larger one implies. Empty when the domain
/// cannot be probed.
pub fn mutex_groups(domain: &Domain) -> Vec<MutexGroup> {
    let Some(problem) = probe_problem(domain) else { return Vec::new() };
    let Ok(problem) = parse_problem(&problem) else { return Vec::new() };
    let (Ok(model), Ok(task)) = (Model::new(domain, &problem), ground(domain, &problem)) else { return Vec::new() };
    let atoms = atom_index(&model, &task);
    let named = |c: &[Part]| {
        let mut parts: Vec<GroupPart> = c
            .iter()
            .map(|p| GroupPart {
                predicate: model.preds[p.pred as usize].name.to_ascii_lowercase(),
                params: p.params.iter().map(|&i| i as usize).collect(),
                counted: p.counted.map(usize::from),
            })
            .collect();
        parts.sort();
        MutexGroup { parts }
    };
    let mut proved: Vec<MutexGroup> = Vec::new();
    for cand in candidates(&model) {
        let inst = induction(&task, &atoms, &cand);
        // A group whose instances are single atoms says nothing; one instance failing is
        // enough to drop it, since a real task may hold that instance.
        if inst.atoms.iter().any(|a| a.len() >= 2) && inst.amo.iter().all(|&ok| ok) {
            proved.push(named(&cand));
        }
    }
    let implied = |g: &MutexGroup, by: &MutexGroup| g != by && g.parts.iter().all(|p| by.parts.contains(p));
    let mut out: Vec<MutexGroup> = proved.iter().filter(|g| !proved.iter().any(|by| implied(g, by))).cloned().collect();
    out.sort_by(|a, b| a.parts.cmp(&b.parts));
    out.dedup();
    out
}

/// The probe task's PDDL (see the module docs), or `None` when the domain cannot be probed.
fn probe_problem(domain: &Domain) -> Option<String> {
    let fluent = |name: &str| domain.actions.iter().any(|a| a.effect.iter().any(|l| l.atom.predicate == name));
    let static_negative = domain
        .actions
        .iter()
        .flat_map(|a| &a.precondition)
        .any(|l| !l.positive && !l.atom.is_equality() && !fluent(&l.atom.predicate));
    if static_negative {
        return None;
    }
    let most_params = domain.actions.iter().map(|a| a.params.len()).max().unwrap_or(0);
    let most_arity = domain.predicates.iter().map(|p| p.params.len()).max().unwrap_or(0);
    let k = most_params + most_arity + 1;
    let mut types: Vec<&str> = domain.types.iter().map(|t| t.name.as_str()).filter(|t| *t != OBJECT).collect();
    types.sort_unstable();
    types.dedup();
    types.push(OBJECT);
    // (name, type) of every object a fact may name: the probe's and the domain's constants.
    let mut objects: Vec<(String, String)> = Vec::new();
    for (ti, ty) in types.iter().enumerate() {
        for i in 0..k {
            objects.push((format!("probe-{ti}-{i}"), ty.to_string()));
        }
    }
    let declared: Vec<(String, String)> = objects.clone();
    objects.extend(domain.constants.iter().map(|c| (c.name.clone(), c.ty.clone())));
    let is_a = |ty: &str, want: &str| {
        let mut cur = ty;
        for _ in 0..=domain.types.len() {
            if cur == want || want == OBJECT {
                return true;
            }
            match domain.types.iter().find(|t| t.name == cur) {
                Some(t) if cur != OBJECT => cur = t.ty.as_str(),
                _ => return false,
            }
        }
        false
    };
    let mut size: u128 = 0;
    let mut init = String::new();
    for p in &domain.predicates {
        let fits: Vec<Vec<&str>> =
            p.params.iter().map(|t| objects.iter().filter(|(_, ty)| is_a(ty, &t.ty)).map(|(n, _)| n.as_str()).collect()).collect();
        size += fits.iter().fold(1u128, |n, f| n.saturating_mul(f.len() as u128));
        if size > MAX_PROBE_ATOMS {
            return None;
        }
        let mut tuple = vec![0usize; fits.len()];
        if fits.iter().any(Vec::is_empty) {
            continue;
        }
        loop {
            init.push_str(&format!(" ({}", p.name));
            for (f, &i) in fits.iter().zip(&tuple) {
                init.push(' ');
                init.push_str(f[i]);
            }
            init.push(')');
            // The next tuple, last position fastest.
            let mut pos = fits.len();
            loop {
                if pos == 0 {
                    break;
                }
                pos -= 1;
                tuple[pos] += 1;
                if tuple[pos] < fits[pos].len() {
                    break;
                }
                tuple[pos] = 0;
            }
            if tuple.iter().all(|&i| i == 0) {
                break;
            }
        }
    }
    let objects: String = declared.iter().map(|(n, t)| format!(" {n} - {t}")).collect();
    Some(format!("(define (problem probe) (:domain {}) (:objects{objects}) (:init{init}) (:goal (and)))", domain.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups_of(guest: &str) -> Vec<MutexGroup> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guests").join(guest).join("domain.pddl");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        mutex_groups(&onebrain_pddl::parse_domain(&text).unwrap())
    }

    fn part(predicate: &str, params: &[usize], counted: Option<usize>) -> GroupPart {
        GroupPart { predicate: predicate.into(), params: params.to_vec(), counted }
    }

    fn group(mut parts: Vec<GroupPart>) -> MutexGroup {
        parts.sort();
        MutexGroup { parts }
    }

    #[test]
    fn blocksworld_gets_its_arm_support_and_top_groups() {
        let got = groups_of("blocksworld");
        let want = [
            // The arm holds at most one block, and is not empty while it does.
            group(vec![part("handempty", &[], None), part("holding", &[], Some(0))]),
            // Each block is on the table, held, or on one block.
            group(vec![part("on", &[0], Some(1)), part("holding", &[0], None), part("ontable", &[0], None)]),
            // Each block is clear, held, or has one block on it (a held block is not clear
            // in this domain: `pick-up` deletes `clear`).
            group(vec![part("on", &[1], Some(0)), part("clear", &[0], None), part("holding", &[0], None)]),
        ];
        for w in &want {
            assert!(got.contains(w), "missing {w:?} in {got:?}");
        }
        assert_eq!(got.len(), want.len(), "{got:?}");
    }

    #[test]
    fn gripper_gets_robby_gripper_and_ball_groups() {
        let got = groups_of("gripper");
        let want = [
            group(vec![part("at-robby", &[], Some(0))]),
            // A gripper is free or carries one ball.
            group(vec![part("carry", &[1], Some(0)), part("free", &[0], None)]),
            // A ball is in one room or in one gripper.
            group(vec![part("at", &[0], Some(1)), part("carry", &[0], Some(1))]),
        ];
        for w in &want {
            assert!(got.contains(w), "missing {w:?} in {got:?}");
        }
        assert_eq!(got.len(), want.len(), "{got:?}");
    }

    #[test]
    fn logistics_and_mystery_blocksworld_get_their_groups() {
        // Logistics: a package or vehicle is at one place or in one vehicle.
        let got = groups_of("logistics");
        assert_eq!(got, vec![group(vec![part("at", &[0], Some(1)), part("in", &[0], Some(1))])]);
        // Mystery BlocksWorld is BlocksWorld renamed: the same three groups.
        let got = groups_of("mystery-blocksworld");
        let want = [
            group(vec![part("harmony", &[], None), part("pain", &[], Some(0))]),
            group(vec![part("craves", &[0], Some(1)), part("pain", &[0], None), part("planet", &[0], None)]),
            group(vec![part("craves", &[1], Some(0)), part("province", &[0], None), part("pain", &[0], None)]),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for w in &want {
            assert!(got.contains(w), "missing {w:?} in {got:?}");
        }
    }

    #[test]
    fn a_domain_whose_actions_break_a_candidate_gets_no_group_for_it() {
        // `teleport` adds `(at ?x ?to)` without deleting where ?x was: an object may be in two
        // places, and nothing may be said about `at`.
        let d = onebrain_pddl::parse_domain(
            "(define (domain d) (:predicates (at ?x ?l))
              (:action go :parameters (?x ?from ?to) :precondition (at ?x ?from) :effect (and (at ?x ?to) (not (at ?x ?from))))
              (:action teleport :parameters (?x ?to) :precondition (and) :effect (at ?x ?to)))",
        )
        .unwrap();
        assert_eq!(mutex_groups(&d), vec![]);
        // Without it, each object is in one place.
        let d = onebrain_pddl::parse_domain(
            "(define (domain d) (:predicates (at ?x ?l))
              (:action go :parameters (?x ?from ?to) :precondition (at ?x ?from) :effect (and (at ?x ?to) (not (at ?x ?from)))))",
        )
        .unwrap();
        assert_eq!(mutex_groups(&d), vec![group(vec![part("at", &[0], Some(1))])]);
    }
}
