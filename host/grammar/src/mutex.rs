//! The initial state may not break the domain's own mutex groups: BlocksWorld's
//! `(holding a)` beside `(handempty)`, or `(on a b)` beside `(on a c)`, is a state no plan of
//! the domain starts from. The groups come with the [`crate::ConstraintSpec`] as plain data
//! (the roles crate proves them from the action schemas, `onebrain_faithful::mutex_groups`);
//! the guard checks them lifted, on the facts' words, with no grounding.
//!
//! Two `:init` facts conflict when they are different atoms that fall in one instance of a
//! group: both match parts of it, and agree on the group's parameter values.

use serde::{Deserialize, Serialize};

/// One predicate's share of a [`MutexGroup`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MutexPart {
    /// The predicate, lower-case.
    pub predicate: String,
    /// The argument positions that carry the group's parameters, in the group's order.
    pub params: Vec<usize>,
    /// The argument position left free (counted), if any. The check does not read it; it
    /// says what the group counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<usize>,
}

/// Atoms of which at most one holds in any state the domain can be in: for each choice of
/// values for the group's parameters, the atoms of its parts with those values at the parts'
/// `params` positions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MutexGroup {
    /// One part per predicate.
    pub parts: Vec<MutexPart>,
}

/// Search nodes the completion search may spend on one fact before it gives up and lets the
/// token through (the fact's close is still checked). Facts have at most a few arguments over
/// a few objects: a search rarely needs more than one node per argument.
const MAX_NODES: usize = 20_000;

/// What a fact over `pred` (with `arity` arguments) may not be, given the `:init` facts
/// already stated (their words: predicate, then arguments): per stated fact and group both
/// fall in, the argument positions and the values there that would put the two in one group
/// instance. A stated fact over `pred` itself also forbids its own arguments (a repeat).
pub(crate) fn forbidden<'a>(groups: &[MutexGroup], pred: &str, arity: usize, stated: impl Iterator<Item = &'a [String]>) -> Vec<(Vec<usize>, Vec<&'a str>)> {
    let mut out = Vec::new();
    for g in stated {
        let Some((head, args)) = g.split_first() else { continue };
        if head == pred && args.len() == arity {
            out.push(((0..arity).collect(), args.iter().map(String::as_str).collect()));
        }
        for group in groups {
            let mine = group.parts.iter().filter(|p| p.predicate == pred && fits(p, arity));
            for p in mine {
                for q in group.parts.iter().filter(|q| q.predicate == *head && fits(q, args.len()) && q.params.len() == p.params.len()) {
                    out.push((p.params.clone(), q.params.iter().map(|&i| args[i].as_str()).collect()));
                }
            }
        }
    }
    out
}

/// Whether a part's positions fit a fact of `arity` arguments (a group from another domain
/// text, or a bad one, must not index out of range).
fn fits(p: &MutexPart, arity: usize) -> bool {
    p.params.iter().chain(&p.counted).all(|&i| i < arity)
}

/// Whether `fact` (predicate, then arguments) falls in one group instance with `other`, a
/// different atom.
pub(crate) fn conflict(groups: &[MutexGroup], fact: &[String], other: &[String]) -> bool {
    if fact == other || fact.is_empty() {
        return false;
    }
    let rules = forbidden(groups, &fact[0], fact.len() - 1, std::iter::once(other));
    rules.iter().any(|(at, values)| at.iter().zip(values).all(|(&i, v)| fact[1 + i] == *v))
}

/// Whether some fact whose arguments begin with `fixed`, continue at the next position with a
/// name from `choices[0]`, and then with names from `choices[1..]`, matches none of the
/// `forbidden` (positions, values) pairs. Depth-first with a node cap: past it, true.
pub(crate) fn free_completion(fixed: &[String], choices: &[Vec<&str>], forbidden: &[(Vec<usize>, Vec<&str>)]) -> bool {
    // A rule over the fixed positions only decides at once; one over a later position is
    // checked where its last position is assigned.
    let k = fixed.len();
    let mut at_depth: Vec<Vec<&(Vec<usize>, Vec<&str>)>> = vec![Vec::new(); choices.len()];
    for rule in forbidden {
        match rule.0.iter().max() {
            Some(&last) if last >= k => {
                if let Some(slot) = at_depth.get_mut(last - k) {
                    slot.push(rule);
                }
            }
            // Every position is fixed: forbidden outright when it matches.
            _ => {
                if rule.0.iter().zip(&rule.1).all(|(&i, v)| fixed.get(i).is_some_and(|f| f == v)) {
                    return false;
                }
            }
        }
    }
    let mut current: Vec<&str> = fixed.iter().map(String::as_str).collect();
    let mut nodes = 0usize;
    search(&mut current, k, choices, &at_depth, &mut nodes)
}

fn search<'a>(current: &mut Vec<&'a str>, k: usize, choices: &[Vec<&'a str>], at_depth: &[Vec<&(Vec<usize>, Vec<&str>)>], nodes: &mut usize) -> bool {
    let d = current.len() - k;
    if d == choices.len() {
        return true;
    }
    for &name in &choices[d] {
        *nodes += 1;
        if *nodes > MAX_NODES {
            return true;
        }
        current.push(name);
        let hit = at_depth[d].iter().any(|(at, values)| at.iter().zip(values).all(|(&i, v)| current[i] == *v));
        if !hit && search(current, k, choices, at_depth, nodes) {
            current.pop();
            return true;
        }
        current.pop();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn blocksworld() -> Vec<MutexGroup> {
        let part = |p: &str, params: &[usize], counted: Option<usize>| MutexPart { predicate: p.into(), params: params.to_vec(), counted };
        vec![
            MutexGroup { parts: vec![part("handempty", &[], None), part("holding", &[], Some(0))] },
            MutexGroup { parts: vec![part("holding", &[0], None), part("on", &[0], Some(1)), part("ontable", &[0], None)] },
            MutexGroup { parts: vec![part("clear", &[0], None), part("holding", &[0], None), part("on", &[1], Some(0))] },
        ]
    }

    #[test]
    fn facts_in_one_group_instance_conflict_and_others_do_not() {
        let g = blocksworld();
        assert!(conflict(&g, &words("holding a"), &words("handempty")));
        assert!(conflict(&g, &words("holding a"), &words("holding b")));
        assert!(conflict(&g, &words("on a b"), &words("on a c")));
        assert!(conflict(&g, &words("on a b"), &words("on c b")));
        assert!(conflict(&g, &words("on a b"), &words("ontable a")));
        assert!(conflict(&g, &words("clear b"), &words("on a b")));
        assert!(!conflict(&g, &words("on a b"), &words("on b c")), "a tower");
        assert!(!conflict(&g, &words("on a b"), &words("clear a")));
        assert!(!conflict(&g, &words("on a b"), &words("on a b")), "the same atom is a repeat, not a conflict");
        assert!(!conflict(&[], &words("holding a"), &words("handempty")), "no groups, no conflicts");
    }

    #[test]
    fn the_groups_travel_with_the_spec_and_an_empty_list_is_not_written() {
        let spec = |init_mutex| crate::ConstraintSpec::Problem {
            domain: "(define (domain bw))".into(),
            prefix: String::new(),
            limits: crate::Limits::default(),
            avoid: vec![],
            forbid_goal_at_init: false,
            init_mutex,
        };
        let off = serde_json::to_string(&spec(vec![])).unwrap();
        assert!(!off.contains("init_mutex"), "specs stored before the rule read the same: {off}");
        let on = spec(blocksworld());
        let json = serde_json::to_string(&on).unwrap();
        assert_eq!(serde_json::from_str::<crate::ConstraintSpec>(&json).unwrap(), on);
    }

    #[test]
    fn a_completion_is_found_only_where_one_is_free() {
        let g = blocksworld();
        let stated = [words("on a b"), words("handempty")];
        let names = ["a", "b", "c"];
        let rules = forbidden(&g, "on", 2, stated.iter().map(Vec::as_slice));
        // `(on a ` : a is on b already, so every `(on a _)` conflicts.
        assert!(!free_completion(&words("a"), &[names.to_vec()], &rules));
        // `(on c ` : c may go on a or c, not on b (b has a on it).
        assert!(free_completion(&words("c"), &[names.to_vec()], &rules));
        assert!(!free_completion(&words("c"), &[vec!["b"]], &rules));
        // `(on ` : c on a is free.
        assert!(free_completion(&[], &[names.to_vec(), names.to_vec()], &rules));
        assert!(!free_completion(&[], &[vec!["a"], names.to_vec()], &rules));
        // `(holding ` : the arm is empty, so none is free.
        let rules = forbidden(&g, "holding", 1, stated.iter().map(Vec::as_slice));
        assert!(!free_completion(&[], &[names.to_vec()], &rules));
    }
}
