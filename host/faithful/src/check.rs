//! The checker: mapping, goal, objects, schemas and plan replay, put together into a report.

use std::collections::HashSet;

use onebrain_core::{Decision, Drift, FaithfulnessReport, Spec};
use onebrain_pddl::{ground, parse_domain, parse_plan, parse_problem, validate, Domain, GroundTask, Plan, Problem};

use crate::goal::{self, Space};
use crate::mapping::{identity_mappings, init_mappings, Budget, PredMap};
use crate::model::Model;
use crate::schema::{self, SchemaMatch};
use crate::work::Work;
use crate::{CheckError, Limits, TaskSize};

/// Above this many predicate-completion combinations, free predicates are assigned greedily.
const MAX_COMPLETIONS: usize = 4096;

/// How many explanation lines one kind of difference may contribute.
const MAX_LINES: usize = 12;

/// The reference side, parsed and grounded once.
struct Reference {
    domain: Domain,
    problem: Problem,
    model: Model,
}

/// The reference parsed and grounded, or why it cannot be.
pub(crate) fn ground_reference(spec: &Spec) -> Result<(Domain, Problem, GroundTask), CheckError> {
    let domain = parse_domain(&spec.domain).map_err(|e| CheckError::ReferenceParse { file: "domain", message: e.to_string() })?;
    let problem = parse_problem(&spec.problem).map_err(|e| CheckError::ReferenceParse { file: "problem", message: e.to_string() })?;
    let task = ground(&domain, &problem).map_err(|e| CheckError::ReferenceGround(e.to_string()))?;
    Ok((domain, problem, task))
}

pub(crate) fn size_of(domain: &Domain, problem: &Problem, task: &GroundTask) -> TaskSize {
    TaskSize {
        objects: (domain.constants.len() + problem.objects.len()) as u64,
        init_facts: problem.init.len() as u64,
        atoms: task.num_atoms() as u64,
        actions: task.actions().len() as u64,
    }
}

fn reference(spec: &Spec) -> Result<(Reference, GroundTask), CheckError> {
    let (domain, problem, task) = ground_reference(spec)?;
    let model = Model::new(&domain, &problem).map_err(CheckError::ReferenceModel)?;
    Ok((Reference { domain, problem, model }, task))
}

/// See [`crate::check`].
pub(crate) fn run(
    reference_spec: &Spec,
    candidate: &Spec,
    plan: Option<&[String]>,
    solvable: bool,
    limits: &Limits,
) -> Result<FaithfulnessReport, CheckError> {
    let (r, task) = reference(reference_spec)?;
    let size = size_of(&r.domain, &r.problem, &task);
    let work = Work::new(limits.max_work(&size));
    let mut report = decide(&r, task, reference_spec, candidate, plan, solvable, limits, &work);
    report.work = work.spent();
    if work.exhausted() && report.decision == Decision::Undecided {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let established = if report.init_preserved {
            format!(
                "objects preserved {}, initial state equal under renaming yes, schemas consistent {}, plan replays {}",
                yes(report.objects_preserved),
                yes(report.schema_consistent),
                yes(report.plan_replay_ok)
            )
        } else {
            "nothing: the initial states were not yet matched".to_string()
        };
        report.explanation.insert(
            0,
            format!(
                "undecided: the work budget ran out ({} units for a task of {} ground actions and {} atoms); established before it ran out: {established}",
                work.limit(),
                size.actions,
                size.atoms
            ),
        );
    }
    Ok(report)
}

/// The checks, in order; `work` meters the state-space stages.
#[allow(clippy::too_many_arguments)]
fn decide(
    r: &Reference,
    task: GroundTask,
    reference_spec: &Spec,
    candidate: &Spec,
    plan: Option<&[String]>,
    solvable: bool,
    limits: &Limits,
    work: &Work,
) -> FaithfulnessReport {
    let mut report = FaithfulnessReport { solvable, ..Default::default() };

    let cand = match parse_domain(&candidate.domain) {
        Err(e) => return unreadable(report, format!("the candidate domain does not parse: {e}")),
        Ok(d) => match parse_problem(&candidate.problem) {
            Err(e) => return unreadable(report, format!("the candidate problem does not parse: {e}")),
            Ok(p) => match Model::new(&d, &p) {
                Err(e) => return unreadable(report, format!("the candidate spec is ill-formed: {e}")),
                Ok(m) => m,
            },
        },
    };

    // The reference's own domain (problem mode, or a copy of it): its predicates, actions,
    // types and constants are given and mean themselves; only objects may be renamed.
    let same = same_domain(&reference_spec.domain, &candidate.domain)
        && cand.preds.len() == r.model.preds.len()
        && cand.actions.len() == r.model.actions.len();
    let pins = if same { constant_pins(&cand, &r.model) } else { Vec::new() };

    let mut budget = Budget::new(limits.max_nodes, work.clone());
    let stage1 = if same {
        identity_mappings(&cand, &r.model, &pins, &mut budget)
    } else {
        init_mappings(&cand, &r.model, limits.max_pred_maps, &mut budget)
    };
    if stage1.found.is_empty() {
        if stage1.undecided {
            report.decision = Decision::Undecided;
            // Nothing is refuted yet; an unsolved candidate is still decided: never faithful.
            report.undecided = solvable;
            if !work.exhausted() {
                report.explanation.push(format!(
                    "undecided: the mapping search exceeded {} nodes before matching the initial states",
                    limits.max_nodes
                ));
            }
            return report;
        }
        return no_mapping(report, &cand, &r.model, limits, same, &pins, work);
    }

    // Complete each viable predicate map over the predicates the initial state does not
    // mention, by the action schemas; keep the best, and among equals the one that agrees
    // most with the names.
    let (pm, f0, sm) = if same {
        let (pm, f) = stage1.found.into_iter().next().expect("at least one mapping");
        let sm = schema::identity(&cand, &r.model, &pm, Some(&f));
        (pm, f, sm)
    } else {
        let mut best: Option<(PredMap, Vec<u32>, SchemaMatch, usize)> = None;
        for (pm, f) in &stage1.found {
            let (full, m) = complete(&cand, &r.model, pm, Some(f));
            let agree = name_agreement(&cand, &r.model, &full);
            let better = best.as_ref().is_none_or(|(_, _, b, a)| {
                (m.matched, std::cmp::Reverse(m.cand_total), agree) > (b.matched, std::cmp::Reverse(b.cand_total), *a)
            });
            if better {
                best = Some((full, f.clone(), m, agree));
            }
        }
        let (pm, f, sm, _) = best.expect("at least one mapping");
        (pm, f, sm)
    };
    report.objects_preserved = true;
    report.init_preserved = true;

    // Goal. The candidate's own plan, replayed in the reference model under the mapping
    // found, passes through reachable reference states, the last of which satisfies the
    // candidate's goal: witnesses for free (the plan-replay path), where a search on a large
    // task would have to find one. Only states the plan reaches step by step join the pool.
    let mut space = Space::new(&r.model, task, limits, work.clone());
    if let Some(Ok((_, translated))) = plan.map(|p| translate(&cand, r, &sm, &f0, p)) {
        space.walk(&translated);
    }
    let gv = goal::compare(&mut space, &cand, &pm, &f0, &pins, limits, &mut budget);
    report.goal_preserved = gv.preserved;
    report.decision = gv.decision;
    let objects = gv.objects.clone();

    // Schemas (constants follow the chosen object map).
    let sm = if cand.constant.iter().any(|&c| c) {
        if same {
            schema::identity(&cand, &r.model, &pm, Some(&objects))
        } else {
            schema::match_schemas(&cand, &r.model, &pm, Some(&objects))
        }
    } else {
        sm
    };
    report.schema_f1 = sm.f1();
    report.schema_consistent = sm.consistent();
    let d = schema::diff(&cand, &r.model, &pm, Some(&objects), &sm);

    // Plan replay.
    let replay = replay(&cand, &r, &sm, &objects, plan);
    report.plan_replay_ok = replay.is_ok();

    report.faithful =
        solvable && report.goal_preserved && report.objects_preserved && report.schema_consistent && report.plan_replay_ok;

    if !solvable {
        report.explanation.push("the candidate was not solved by the verifier".into());
    }
    if !gv.preserved {
        report.explanation.extend(gv.explanation.iter().take(MAX_LINES).cloned());
    }
    report.explanation.extend(d.missing_pre.iter().take(MAX_LINES).cloned());
    report.explanation.extend(d.other.iter().take(MAX_LINES).cloned());
    if !sm.consistent() {
        report.explanation.push(format!(
            "schema precision {:.3}, recall {:.3}, F1 {:.3} over {} candidate and {} reference triples",
            sm.precision(),
            sm.recall(),
            sm.f1(),
            sm.cand_total,
            sm.ref_total
        ));
    }
    if let Err(e) = &replay {
        if solvable || plan.is_some() {
            report.explanation.push(e.clone());
        }
    }

    // Only the goal is open: nothing established refutes the candidate.
    report.undecided = solvable
        && !report.faithful
        && gv.decision == Decision::Undecided
        && report.schema_consistent
        && report.plan_replay_ok;
    if solvable && !report.faithful && !report.undecided {
        report.drift = if !report.goal_preserved && report.decision != Decision::Undecided {
            Some(Drift::GoalWeakening)
        } else if !d.missing_pre.is_empty() && d.other.is_empty() {
            Some(Drift::ConstraintOmission)
        } else if !sm.consistent() {
            Some(Drift::SchemaDrift)
        } else {
            None
        };
    }
    if !same {
        report.explanation.extend(symmetry_note(&cand, &r.model, &pm));
    }
    report
}

/// The domain text with comments, case and layout normalised away: two domains that agree
/// here are the same domain.
fn normalise(domain: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    for line in domain.lines() {
        let code = line.split(';').next().unwrap_or("");
        let spaced = code.replace('(', " ( ").replace(')', " ) ");
        tokens.extend(spaced.split_whitespace().map(|t| t.to_lowercase()));
    }
    tokens
}

fn same_domain(a: &str, b: &str) -> bool {
    normalise(a) == normalise(b)
}

/// Each candidate constant with the reference constant of its name.
fn constant_pins(cand: &Model, reference: &Model) -> Vec<(u32, u32)> {
    let mut pins = Vec::new();
    for (i, o) in cand.objects.iter().enumerate() {
        if !cand.constant[i] {
            continue;
        }
        if let Some(j) = reference.objects.iter().zip(&reference.constant).position(|(x, &c)| c && x.eq_ignore_ascii_case(o)) {
            pins.push((i as u32, j as u32));
        }
    }
    pins
}

/// For each candidate predicate, the reference predicate of the same name and arity.
fn by_name(cand: &Model, reference: &Model) -> Vec<Option<u32>> {
    cand.preds
        .iter()
        .map(|p| {
            reference
                .preds
                .iter()
                .position(|q| q.name.eq_ignore_ascii_case(&p.name) && q.arity == p.arity && q.is_type == p.is_type)
                .map(|q| q as u32)
        })
        .collect()
}

/// How many candidate predicates `pm` sends to the reference predicate of their own name,
/// arguments in order.
fn name_agreement(cand: &Model, reference: &Model, pm: &PredMap) -> usize {
    by_name(cand, reference).iter().enumerate().filter(|(p, q)| q.is_some_and(|q| pm.sends(*p, q))).count()
}

/// When the candidate's predicates carry the reference's names but the mapping found pairs
/// some of them differently (`up` read as `right` reversed), a line that says so, and whether
/// that pairing is a symmetry of the reference domain (its schemas map onto themselves): then
/// the candidate is the reference task only up to that symmetry, and under the names it uses
/// it states a different task.
fn symmetry_note(cand: &Model, reference: &Model, pm: &PredMap) -> Option<String> {
    let names = by_name(cand, reference);
    let mut sigma = PredMap { to: vec![None; reference.preds.len()] };
    let mut moved = Vec::new();
    for (p, pred) in cand.preds.iter().enumerate() {
        let Some((q, perm)) = &pm.to[p] else { continue };
        if pred.trivial {
            continue;
        }
        // A renamed predicate: the names do not say what it should be.
        let own = names[p]?;
        sigma.to[own as usize] = Some((*q, perm.clone()));
        if !pm.sends(p, own) {
            let order = if perm.iter().enumerate().all(|(i, &j)| i as u32 == j) {
                String::new()
            } else if perm.iter().rev().enumerate().all(|(i, &j)| i as u32 == j) {
                " (arguments reversed)".to_string()
            } else {
                format!(" (argument order {perm:?})")
            };
            moved.push(format!("`{}` ↦ `{}`{order}", pred.name, reference.preds[*q as usize].name));
        }
    }
    if moved.is_empty() {
        return None;
    }
    for (q, slot) in sigma.to.iter_mut().enumerate() {
        if slot.is_none() {
            *slot = Some((q as u32, (0..reference.preds[q].arity as u32).collect()));
        }
    }
    let ident: Vec<u32> = (0..reference.objects.len() as u32).collect();
    let symmetric = schema::match_schemas(reference, reference, &sigma, Some(&ident)).consistent();
    Some(if symmetric {
        format!(
            "note: the mapping found is a non-identity symmetry of the reference domain ({}): the candidate is the reference task only up to it, and under the reference's own names it states a different task",
            moved.join(", ")
        )
    } else {
        format!("note: the mapping found pairs predicates against their names ({})", moved.join(", "))
    })
}

fn unreadable(mut report: FaithfulnessReport, why: String) -> FaithfulnessReport {
    report.explanation.push(why);
    report
}

/// Completes `base` over the candidate predicates it leaves unmapped (those absent from the
/// initial state), choosing the images that match the most schema triples.
fn complete(cand: &Model, reference: &Model, base: &PredMap, obj: Option<&[u32]>) -> (PredMap, SchemaMatch) {
    let taken: HashSet<u32> = base.to.iter().flatten().map(|(q, _)| *q).collect();
    let free_c: Vec<usize> = (0..cand.preds.len()).filter(|&p| base.to[p].is_none() && !cand.preds[p].trivial).collect();
    let free_r: Vec<u32> =
        (0..reference.preds.len() as u32).filter(|q| !taken.contains(q) && !reference.preds[*q as usize].trivial).collect();
    // Each free candidate predicate's options: a free reference predicate of the same arity,
    // in any argument order.
    let options: Vec<Vec<(u32, Box<[u32]>)>> = free_c
        .iter()
        .map(|&p| {
            let arity = cand.preds[p].arity;
            let mut v = Vec::new();
            for &q in &free_r {
                if reference.preds[q as usize].arity == arity {
                    for perm in permutations(arity) {
                        v.push((q, perm));
                    }
                }
            }
            v
        })
        .collect();
    let combos: usize = options.iter().fold(1usize, |acc, o| acc.saturating_mul(o.len() + 1));
    let mut pm = base.clone();
    let mut best = (pm.clone(), schema::match_schemas(cand, reference, &pm, obj));
    if combos <= MAX_COMPLETIONS {
        let mut used = HashSet::new();
        enumerate(0, &free_c, &options, &mut pm, &mut used, cand, reference, obj, &mut best);
    } else {
        // Greedy: one predicate at a time, each given the image that helps most.
        for (i, &p) in free_c.iter().enumerate() {
            let mut choice = None;
            for (q, perm) in &options[i] {
                if best.0.to.iter().flatten().any(|(t, _)| t == q) {
                    continue;
                }
                let mut trial = best.0.clone();
                trial.to[p] = Some((*q, perm.clone()));
                let m = schema::match_schemas(cand, reference, &trial, obj);
                if m.matched > choice.as_ref().map_or(best.1.matched, |(_, b): &(PredMap, SchemaMatch)| b.matched) {
                    choice = Some((trial, m));
                }
            }
            if let Some(c) = choice {
                best = c;
            }
        }
    }
    best
}

#[allow(clippy::too_many_arguments)]
fn enumerate(
    i: usize,
    free_c: &[usize],
    options: &[Vec<(u32, Box<[u32]>)>],
    pm: &mut PredMap,
    used: &mut HashSet<u32>,
    cand: &Model,
    reference: &Model,
    obj: Option<&[u32]>,
    best: &mut (PredMap, SchemaMatch),
) {
    if i == free_c.len() {
        let m = schema::match_schemas(cand, reference, pm, obj);
        if m.matched > best.1.matched {
            *best = (pm.clone(), m);
        }
        return;
    }
    enumerate(i + 1, free_c, options, pm, used, cand, reference, obj, best);
    for (q, perm) in &options[i] {
        if used.insert(*q) {
            pm.to[free_c[i]] = Some((*q, perm.clone()));
            enumerate(i + 1, free_c, options, pm, used, cand, reference, obj, best);
            pm.to[free_c[i]] = None;
            used.remove(q);
        }
    }
}

fn permutations(k: usize) -> Vec<Box<[u32]>> {
    let mut out = Vec::new();
    let mut cur: Vec<u32> = Vec::new();
    fn rec(k: usize, cur: &mut Vec<u32>, out: &mut Vec<Box<[u32]>>) {
        if cur.len() == k {
            out.push(cur.clone().into_boxed_slice());
            return;
        }
        for j in 0..k as u32 {
            if !cur.contains(&j) {
                cur.push(j);
                rec(k, cur, out);
                cur.pop();
            }
        }
    }
    rec(k, &mut cur, &mut out);
    out
}

/// No predicate/object map matches the initial states: say whether objects or types differ
/// (type drift) or only the facts about them, and still score the schemas where possible.
/// With `same` (the reference's own domain), predicates and types mean themselves: only
/// object renamings that keep `pins` (the constants) count.
fn no_mapping(
    mut report: FaithfulnessReport,
    cand: &Model,
    reference: &Model,
    limits: &Limits,
    same: bool,
    pins: &[(u32, u32)],
    work: &Work,
) -> FaithfulnessReport {
    let (nc, nr) = (cand.objects.len(), reference.objects.len());
    let mut type_drift = false;
    if nc != nr {
        type_drift = true;
        let extra: Vec<&str> = cand.objects.iter().filter(|o| !reference.objects.contains(o)).map(|s| s.as_str()).collect();
        let missing: Vec<&str> = reference.objects.iter().filter(|o| !cand.objects.contains(o)).map(|s| s.as_str()).collect();
        let mut line = format!("the candidate declares {nc} objects, the reference {nr}");
        if !extra.is_empty() && extra.len() <= MAX_LINES {
            line.push_str(&format!("; not in the reference by name: {}", extra.join(" ")));
        }
        if !missing.is_empty() && missing.len() <= MAX_LINES {
            line.push_str(&format!("; reference objects absent by name: {}", missing.join(" ")));
        }
        report.explanation.push(line);
    } else {
        let (tc, tr) = (type_part(cand), type_part(reference));
        let mut budget = Budget::new(limits.max_nodes, work.clone());
        let types = if same { identity_mappings(&tc, &tr, pins, &mut budget) } else { init_mappings(&tc, &tr, 1, &mut budget) };
        if types.found.is_empty() && !types.undecided {
            type_drift = true;
            report.explanation.push(
                "no renaming maps the candidate's object types (declared types and static one-place predicates) onto the reference's"
                    .into(),
            );
        }
    }
    report.objects_preserved = !type_drift;
    if !type_drift {
        report.explanation.push(if same {
            "the candidate's initial state differs from the reference's under every renaming of its objects (the domain is the reference's: predicates keep their meaning)".into()
        } else {
            "the candidate's initial state differs from the reference's under every renaming".into()
        });
    }
    report.explanation.extend(named_init_diff(cand, reference));

    if same {
        // Constants are the only objects schemas name, and the pins pair them.
        let mut obj: Vec<u32> = (0..cand.objects.len() as u32).collect();
        for &(a, b) in pins {
            obj[a as usize] = b;
        }
        let sm = schema::identity(cand, reference, &PredMap::identity(cand), Some(&obj));
        report.schema_f1 = sm.f1();
        report.schema_consistent = sm.consistent();
        if report.solvable {
            report.drift = if type_drift { Some(Drift::TypeDrift) } else { None };
        }
        return report;
    }
    // Schemas on their own: by predicate name where the names agree, else by structure alone.
    let by_name = PredMap {
        to: cand
            .preds
            .iter()
            .map(|p| {
                reference
                    .preds
                    .iter()
                    .position(|q| q.name == p.name && q.arity == p.arity && !q.trivial && !p.trivial)
                    .map(|q| (q as u32, (0..p.arity as u32).collect()))
            })
            .collect(),
    };
    let empty = PredMap { to: vec![None; cand.preds.len()] };
    let (_, sm_struct) = complete(cand, reference, &empty, None);
    let sm_name = schema::match_schemas(cand, reference, &by_name, None);
    let (pm, sm) = if sm_name.matched >= sm_struct.matched { (by_name, sm_name) } else { (empty, sm_struct) };
    let _ = pm;
    report.schema_f1 = sm.f1();
    report.schema_consistent = sm.consistent();
    if report.solvable {
        report.drift = if type_drift { Some(Drift::TypeDrift) } else { None };
    }
    report
}

/// The candidate's init restricted to type facts: declared types and static one-place predicates.
fn type_part(m: &Model) -> Model {
    let mut t = m.clone();
    t.init.retain(|f| {
        let p = &m.preds[f.pred as usize];
        p.arity == 1 && !p.fluent
    });
    t
}

/// When predicate and object names agree, the init facts that differ by name: a hint a
/// person can check.
fn named_init_diff(cand: &Model, reference: &Model) -> Vec<String> {
    let names = |m: &Model| -> HashSet<String> { m.init.iter().map(|f| m.fact_name(f)).collect() };
    let (c, r) = (names(cand), names(reference));
    let shares_names = cand.preds.iter().all(|p| p.trivial || reference.preds.iter().any(|q| q.name == p.name))
        && cand.objects.iter().filter(|o| reference.objects.contains(o)).count() * 2 >= cand.objects.len();
    if !shares_names {
        return Vec::new();
    }
    let mut missing: Vec<&String> = r.difference(&c).collect();
    let mut extra: Vec<&String> = c.difference(&r).collect();
    missing.sort();
    extra.sort();
    let mut out = Vec::new();
    for m in missing.into_iter().take(MAX_LINES) {
        out.push(format!("reference init fact {m} is missing from the candidate (by name)"));
    }
    for e in extra.into_iter().take(MAX_LINES) {
        out.push(format!("candidate init fact {e} is not in the reference (by name)"));
    }
    out
}

/// Translates the candidate's plan into the reference's actions and objects and validates it
/// in the reference model.
fn replay(cand: &Model, r: &Reference, sm: &SchemaMatch, objects: &[u32], plan: Option<&[String]>) -> Result<(), String> {
    let Some(plan) = plan else {
        return Err("no plan was given to replay in the reference model".into());
    };
    let (parsed, translated) = translate(cand, r, sm, objects, plan)?;
    let v = validate(&r.domain, &r.problem, &translated);
    if v.valid {
        return Ok(());
    }
    let mut msg = match v.failed_step {
        Some(k) => format!(
            "plan replay fails at step {k}: candidate {} is reference {}: {}",
            parsed.steps[k - 1],
            translated.steps[k - 1],
            v.reason
        ),
        None => format!("plan replay: {}", v.reason),
    };
    if !v.unsatisfied.is_empty() {
        msg.push_str(&format!("; unsatisfied: {}", v.unsatisfied.join(" ")));
    }
    Err(msg)
}

/// The candidate's plan, and the same plan in the reference's actions and objects.
fn translate(cand: &Model, r: &Reference, sm: &SchemaMatch, objects: &[u32], plan: &[String]) -> Result<(Plan, Plan), String> {
    let parsed = parse_plan(&plan.join("\n")).map_err(|e| format!("the candidate plan does not parse: {e}"))?;
    let mut text = String::new();
    for (k, step) in parsed.steps.iter().enumerate() {
        let k = k + 1;
        let Some(ci) = cand.actions.iter().position(|a| a.name == step.action) else {
            return Err(format!("plan step {k} {step}: the candidate domain has no action `{}`", step.action));
        };
        let Some(pair) = sm.pairs.iter().find(|p| p.cand == ci) else {
            return Err(format!("plan step {k} {step}: candidate action `{}` has no counterpart in the reference", step.action));
        };
        let ra = &r.model.actions[pair.reference];
        if step.args.len() != cand.actions[ci].params.len() {
            return Err(format!("plan step {k} {step}: `{}` takes {} arguments", step.action, cand.actions[ci].params.len()));
        }
        let mut args: Vec<Option<&str>> = vec![None; ra.params.len()];
        for (i, a) in step.args.iter().enumerate() {
            let Some(o) = cand.objects.iter().position(|x| x == a) else {
                return Err(format!("plan step {k} {step}: unknown object `{a}`"));
            };
            if let Some(j) = pair.params[i] {
                args[j as usize] = Some(r.model.objects[objects[o] as usize].as_str());
            }
        }
        let Some(args) = args.into_iter().collect::<Option<Vec<&str>>>() else {
            return Err(format!("plan step {k} {step}: reference action `{}` needs a parameter the candidate's lacks", ra.name));
        };
        text.push('(');
        text.push_str(&ra.name);
        for a in args {
            text.push(' ');
            text.push_str(a);
        }
        text.push_str(")\n");
    }
    let translated = parse_plan(&text).map_err(|e| format!("internal: the translated plan does not parse: {e}"))?;
    Ok((parsed, translated))
}
