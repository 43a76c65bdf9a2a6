//! Action-schema consistency: candidate actions are paired with reference actions by their
//! precondition/add/delete structure under the predicate mapping, never by name.
//!
//! A schema is the set of its (role, literal) pairs, arguments written as parameter positions.
//! For a candidate and a reference action, every injective map of the candidate's parameters
//! onto the reference's is tried and scored by the number of pairs the two share; the actions
//! are then paired by a maximum-weight assignment (exact, by dynamic programming over subsets
//! of reference actions). Precision, recall and F1 are over all (action, role, literal)
//! triples. A reference precondition the candidate lacks is a constraint omission; anything
//! else that differs is schema drift.

use std::collections::HashSet;

use crate::mapping::PredMap;
use crate::model::{Arg, Model, PredRef, Role, SchemaLit};

/// Above this many parameters only the identity order is tried (8! = 40,320 orders per pair
/// would dominate the check; no benchmark action has more than 4 parameters).
const MAX_PERMUTED_PARAMS: usize = 7;

/// Above this many reference actions the pairing is greedy instead of exact (2^16 subsets).
const MAX_EXACT_ACTIONS: usize = 16;

/// One paired action: candidate index, reference index, and where each candidate parameter
/// goes among the reference's (`None`: nowhere).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pair {
    pub cand: usize,
    pub reference: usize,
    pub params: Vec<Option<u32>>,
    pub score: usize,
}

/// The pairing of action schemas and its triple counts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SchemaMatch {
    pub pairs: Vec<Pair>,
    pub matched: usize,
    pub cand_total: usize,
    pub ref_total: usize,
}

impl SchemaMatch {
    pub fn precision(&self) -> f64 {
        if self.cand_total == 0 {
            if self.ref_total == 0 {
                1.0
            } else {
                0.0
            }
        } else {
            self.matched as f64 / self.cand_total as f64
        }
    }

    pub fn recall(&self) -> f64 {
        if self.ref_total == 0 {
            if self.cand_total == 0 {
                1.0
            } else {
                0.0
            }
        } else {
            self.matched as f64 / self.ref_total as f64
        }
    }

    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }

    /// Every triple matched, none extra.
    pub fn consistent(&self) -> bool {
        self.matched == self.cand_total && self.matched == self.ref_total
    }
}

/// A candidate literal in the reference's vocabulary; `None` when its predicate has no image.
/// Unmapped parameters become `Param(u32::MAX)`, which matches nothing.
fn map_lit(l: &SchemaLit, pm: &PredMap, params: &[Option<u32>], obj: Option<&[u32]>) -> Option<SchemaLit> {
    let arg = |a: &Arg| match *a {
        Arg::Param(i) => Arg::Param(params.get(i as usize).copied().flatten().unwrap_or(u32::MAX)),
        Arg::Const(o) => obj.map_or(Arg::Const(u32::MAX), |f| Arg::Const(f[o as usize])),
    };
    let (pred, args) = match l.pred {
        PredRef::Eq => {
            let mut args: Vec<Arg> = l.args.iter().map(arg).collect();
            args.sort();
            (PredRef::Eq, args)
        }
        PredRef::Pred(p) => {
            let (q, perm) = pm.to.get(p as usize)?.as_ref()?;
            let mut args = vec![Arg::Param(u32::MAX); l.args.len()];
            for (i, a) in l.args.iter().enumerate() {
                args[perm[i] as usize] = arg(a);
            }
            (PredRef::Pred(*q), args)
        }
    };
    Some(SchemaLit { role: l.role, positive: l.positive, pred, args })
}

/// Equality arguments are unordered: the reference's are sorted too.
fn normal(l: &SchemaLit) -> SchemaLit {
    let mut l = l.clone();
    if l.pred == PredRef::Eq {
        l.args.sort();
    }
    l
}

/// Every injective partial map of `nc` candidate parameters into `nr` reference parameters
/// that maps as many as possible.
fn param_maps(nc: usize, nr: usize) -> Vec<Vec<Option<u32>>> {
    if nc.max(nr) > MAX_PERMUTED_PARAMS {
        return vec![(0..nc).map(|i| (i < nr).then_some(i as u32)).collect()];
    }
    let mut out = Vec::new();
    let mut cur = Vec::with_capacity(nc);
    let mut used = vec![false; nr];
    fn rec(i: usize, nc: usize, nr: usize, skips: usize, cur: &mut Vec<Option<u32>>, used: &mut [bool], out: &mut Vec<Vec<Option<u32>>>) {
        if i == nc {
            out.push(cur.clone());
            return;
        }
        for j in 0..nr {
            if !used[j] {
                used[j] = true;
                cur.push(Some(j as u32));
                rec(i + 1, nc, nr, skips, cur, used, out);
                cur.pop();
                used[j] = false;
            }
        }
        if skips > 0 {
            cur.push(None);
            rec(i + 1, nc, nr, skips - 1, cur, used, out);
            cur.pop();
        }
    }
    rec(0, nc, nr, nc.saturating_sub(nr), &mut cur, &mut used, &mut out);
    out
}

/// The best parameter map of candidate action `c` onto reference action `r` and its score.
fn best_pair(cand: &Model, reference: &Model, pm: &PredMap, obj: Option<&[u32]>, c: usize, r: usize) -> Pair {
    let ca = &cand.actions[c];
    let ra = &reference.actions[r];
    let rset: HashSet<SchemaLit> = ra.lits.iter().map(normal).collect();
    let mut best = Pair { cand: c, reference: r, params: vec![None; ca.params.len()], score: 0 };
    let mut first = true;
    for params in param_maps(ca.params.len(), ra.params.len()) {
        let score = ca.lits.iter().filter_map(|l| map_lit(l, pm, &params, obj)).filter(|l| rset.contains(l)).count();
        if first || score > best.score {
            best = Pair { cand: c, reference: r, params, score };
            first = false;
        }
    }
    best
}

/// Pairs candidate and reference actions to maximise the matched triples.
pub(crate) fn match_schemas(cand: &Model, reference: &Model, pm: &PredMap, obj: Option<&[u32]>) -> SchemaMatch {
    let (nc, nr) = (cand.actions.len(), reference.actions.len());
    let table: Vec<Vec<Pair>> = (0..nc).map(|c| (0..nr).map(|r| best_pair(cand, reference, pm, obj, c, r)).collect()).collect();
    let mut pairs = Vec::new();
    if nr <= MAX_EXACT_ACTIONS {
        // dp[i][mask]: best total for candidate actions i.. with reference actions `mask` taken.
        let full = 1usize << nr;
        let mut dp = vec![vec![0usize; full]; nc + 1];
        for i in (0..nc).rev() {
            for mask in 0..full {
                let mut best = dp[i + 1][mask];
                for r in 0..nr {
                    if mask & (1 << r) == 0 && table[i][r].score > 0 {
                        best = best.max(table[i][r].score + dp[i + 1][mask | (1 << r)]);
                    }
                }
                dp[i][mask] = best;
            }
        }
        let mut mask = 0;
        for i in 0..nc {
            if dp[i][mask] == dp[i + 1][mask] {
                continue;
            }
            let r = (0..nr)
                .find(|&r| mask & (1 << r) == 0 && table[i][r].score > 0 && table[i][r].score + dp[i + 1][mask | (1 << r)] == dp[i][mask])
                .expect("dp back-pointer");
            pairs.push(table[i][r].clone());
            mask |= 1 << r;
        }
    } else {
        let mut all: Vec<&Pair> = table.iter().flatten().filter(|p| p.score > 0).collect();
        all.sort_by_key(|p| std::cmp::Reverse(p.score));
        let (mut uc, mut ur) = (vec![false; nc], vec![false; nr]);
        for p in all {
            if !uc[p.cand] && !ur[p.reference] {
                uc[p.cand] = true;
                ur[p.reference] = true;
                pairs.push(p.clone());
            }
        }
    }
    SchemaMatch {
        matched: pairs.iter().map(|p| p.score).sum(),
        cand_total: cand.actions.iter().map(|a| a.lits.len()).sum(),
        ref_total: reference.actions.iter().map(|a| a.lits.len()).sum(),
        pairs,
    }
}

/// Each candidate action paired with the reference action at its own index, parameters in
/// order: the pairing when the candidate's domain is the reference's own.
pub(crate) fn identity(cand: &Model, reference: &Model, pm: &PredMap, obj: Option<&[u32]>) -> SchemaMatch {
    let mut pairs = Vec::new();
    for (i, ca) in cand.actions.iter().enumerate() {
        let Some(ra) = reference.actions.get(i) else { break };
        let params: Vec<Option<u32>> = (0..ca.params.len()).map(|k| (k < ra.params.len()).then_some(k as u32)).collect();
        let rset: HashSet<SchemaLit> = ra.lits.iter().map(normal).collect();
        let score = ca.lits.iter().filter_map(|l| map_lit(l, pm, &params, obj)).filter(|l| rset.contains(l)).count();
        pairs.push(Pair { cand: i, reference: i, params, score });
    }
    SchemaMatch {
        matched: pairs.iter().map(|p| p.score).sum(),
        cand_total: cand.actions.iter().map(|a| a.lits.len()).sum(),
        ref_total: reference.actions.iter().map(|a| a.lits.len()).sum(),
        pairs,
    }
}

/// What differs, in words, split by drift category.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct SchemaDiff {
    /// Reference preconditions the candidate lacks.
    pub missing_pre: Vec<String>,
    /// Every other difference.
    pub other: Vec<String>,
}

/// Lists the differences of a pairing.
pub(crate) fn diff(cand: &Model, reference: &Model, pm: &PredMap, obj: Option<&[u32]>, m: &SchemaMatch) -> SchemaDiff {
    let mut d = SchemaDiff::default();
    for p in &m.pairs {
        let (ca, ra) = (&cand.actions[p.cand], &reference.actions[p.reference]);
        let who = if ca.name == ra.name { format!("`{}`", ra.name) } else { format!("`{}` (candidate `{}`)", ra.name, ca.name) };
        let mapped: Vec<(Option<SchemaLit>, &SchemaLit)> = ca.lits.iter().map(|l| (map_lit(l, pm, &p.params, obj), l)).collect();
        let cset: HashSet<&SchemaLit> = mapped.iter().filter_map(|(m, _)| m.as_ref()).collect();
        for l in &ra.lits {
            if !cset.contains(&normal(l)) {
                let line = format!("action {who} lacks the {} {}", l.role, reference.lit_name(ra, l));
                if l.role == Role::Pre {
                    d.missing_pre.push(line);
                } else {
                    d.other.push(line);
                }
            }
        }
        let rset: HashSet<SchemaLit> = ra.lits.iter().map(normal).collect();
        for (m, l) in &mapped {
            if !m.as_ref().is_some_and(|m| rset.contains(m)) {
                d.other.push(format!("action {who} has an extra {} {}", l.role, cand.lit_name(ca, l)));
            }
        }
    }
    for (r, a) in reference.actions.iter().enumerate() {
        if !m.pairs.iter().any(|p| p.reference == r) {
            d.other.push(format!("reference action `{}` has no counterpart in the candidate domain", a.name));
        }
    }
    for (c, a) in cand.actions.iter().enumerate() {
        if !m.pairs.iter().any(|p| p.cand == c) {
            d.other.push(format!("candidate action `{}` matches no reference action", a.name));
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_pddl::{parse_domain, parse_problem};

    const BW: &str = "(define (domain bw) (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
      (:action stack :parameters (?x ?y) :precondition (and (holding ?x) (clear ?y))
        :effect (and (on ?x ?y) (clear ?x) (handempty) (not (holding ?x)) (not (clear ?y))))
      (:action pick :parameters (?x) :precondition (and (clear ?x) (ontable ?x) (handempty))
        :effect (and (holding ?x) (not (clear ?x)) (not (ontable ?x)) (not (handempty)))))";
    const P: &str = "(define (problem p) (:domain bw) (:objects a) (:init (clear a) (ontable a) (handempty)) (:goal (holding a)))";

    fn model(d: &str) -> Model {
        Model::new(&parse_domain(d).unwrap(), &parse_problem(P).unwrap()).unwrap()
    }

    fn identity(m: &Model) -> PredMap {
        PredMap { to: m.preds.iter().enumerate().map(|(i, p)| Some((i as u32, (0..p.arity as u32).collect()))).collect() }
    }

    #[test]
    fn identical_domains_match_fully() {
        let r = model(BW);
        let m = match_schemas(&r, &r, &identity(&r), None);
        assert!(m.consistent());
        assert_eq!(m.f1(), 1.0);
        assert_eq!(m.ref_total, 7 + 7);
        assert_eq!(diff(&r, &r, &identity(&r), None, &m), SchemaDiff::default());
    }

    #[test]
    fn swapped_parameters_and_action_order_still_match() {
        let r = model(BW);
        let c = model(&BW.replace("(?x ?y)", "(?y ?x)").replace("stack", "zzz"));
        let m = match_schemas(&c, &r, &identity(&r), None);
        assert!(m.consistent(), "{m:?}");
    }

    #[test]
    fn a_missing_precondition_is_named() {
        let r = model(BW);
        let c = model(&BW.replace("(and (holding ?x) (clear ?y))", "(holding ?x)"));
        let m = match_schemas(&c, &r, &identity(&r), None);
        assert!(!m.consistent());
        assert_eq!((m.matched, m.cand_total, m.ref_total), (13, 13, 14));
        assert!((m.recall() - 13.0 / 14.0).abs() < 1e-12 && m.precision() == 1.0);
        let d = diff(&c, &r, &identity(&r), None, &m);
        assert_eq!(d.missing_pre, ["action `stack` lacks the precondition (clear ?y)"]);
        assert!(d.other.is_empty(), "{d:?}");
    }

    #[test]
    fn a_swapped_add_and_delete_is_schema_drift() {
        let r = model(BW);
        let c = model(&BW.replace("(and (on ?x ?y) (clear ?x) (handempty) (not (holding ?x)) (not (clear ?y)))", "(and (on ?x ?y) (clear ?y) (handempty) (not (holding ?x)) (not (clear ?x)))"));
        let m = match_schemas(&c, &r, &identity(&r), None);
        let d = diff(&c, &r, &identity(&r), None, &m);
        assert!(d.missing_pre.is_empty());
        assert_eq!(d.other.len(), 4, "{d:?}");
        assert!(d.other.contains(&"action `stack` lacks the add effect (clear ?x)".to_string()), "{d:?}");
        assert!(d.other.contains(&"action `stack` has an extra delete effect (clear ?x)".to_string()), "{d:?}");
    }

    #[test]
    fn parameter_maps_cover_injections() {
        assert_eq!(param_maps(2, 2).len(), 2);
        assert_eq!(param_maps(3, 3).len(), 6);
        // Two candidate parameters into three reference ones: 3·2 ordered choices.
        assert_eq!(param_maps(2, 3).len(), 6);
        // Three into two: one of the three stays unmapped.
        assert_eq!(param_maps(3, 2).len(), 6);
    }
}
