//! PDDL parser: S-expression tree → [`Domain`], [`Problem`], [`Plan`].

mod formula;
mod syntax;

use crate::ast::{Action, Domain, Literal, Plan, PlanStep, Predicate, Problem};
use crate::diag::Span;
use crate::error::{ParseError, ParseErrorKind};
use crate::sexpr::{read, List, SExpr, Sym};
use formula::{atom, condition, effect, Ctx};
use syntax::{
    describe, head, list, malformed, name, nth, once, sym, typed_list, unsupported, Result,
};

/// Requirements this toolkit handles. `:adl` is accepted because language models write it to
/// mean "negative preconditions and equality"; the ADL constructs themselves are rejected
/// where they are used, so accepting the keyword never hides a misparse.
pub const SUPPORTED_REQUIREMENTS: &[&str] = &[
    ":strips",
    ":typing",
    ":negative-preconditions",
    ":equality",
    ":adl",
];

/// Requirements that name constructs this toolkit rejects, with the construct's description.
const UNSUPPORTED_REQUIREMENTS: &[(&str, &str)] = &[
    (
        ":conditional-effects",
        "conditional effects (:conditional-effects)",
    ),
    (
        ":universal-preconditions",
        "universally quantified preconditions (:universal-preconditions)",
    ),
    (
        ":existential-preconditions",
        "existentially quantified preconditions (:existential-preconditions)",
    ),
    (
        ":quantified-preconditions",
        "quantified preconditions (:quantified-preconditions)",
    ),
    (
        ":disjunctive-preconditions",
        "disjunctive preconditions (:disjunctive-preconditions)",
    ),
    (":numeric-fluents", "numeric fluents (:numeric-fluents)"),
    (":fluents", "numeric fluents (:fluents)"),
    (":object-fluents", "object fluents (:object-fluents)"),
    (":action-costs", "action costs (:action-costs)"),
    (":durative-actions", "durative actions (:durative-actions)"),
    (
        ":duration-inequalities",
        "duration inequalities (:duration-inequalities)",
    ),
    (
        ":continuous-effects",
        "continuous effects (:continuous-effects)",
    ),
    (
        ":derived-predicates",
        "derived predicates (:derived-predicates)",
    ),
    (
        ":timed-initial-literals",
        "timed initial literals (:timed-initial-literals)",
    ),
    (":preferences", "preferences (:preferences)"),
    (
        ":constraints",
        "state-trajectory constraints (:constraints)",
    ),
];

/// Reads `(define (KIND NAME) sections...)` as the only top-level expression.
fn define<'a>(top: &'a [SExpr], kind: &str) -> Result<(&'a List, String, Span)> {
    let Some(first) = top.first() else {
        return Err(ParseError::new(
            ParseErrorKind::UnexpectedEof,
            format!("empty input: expected (define ({kind} NAME) ...)"),
            Span::new(1, 1),
        ));
    };
    let def = list(first, "(define ...)")?;
    match head(def) {
        Some(h) if h.text == "define" => {}
        _ => return malformed(def.span, format!("expected (define ({kind} NAME) ...)")),
    }
    let header = list(
        nth(def, 1, &format!("({kind} NAME)"))?,
        &format!("({kind} NAME)"),
    )?;
    match head(header) {
        Some(h) if h.text == kind => {}
        Some(h) if h.text == "domain" || h.text == "problem" => {
            return malformed(
                h.span,
                format!(
                    "expected a {kind} definition, found a {} definition",
                    h.text
                ),
            )
        }
        _ => return malformed(header.span, format!("expected ({kind} NAME)")),
    }
    let (n, span) = name(
        nth(header, 1, &format!("the {kind} name"))?,
        &format!("{kind} name"),
    )?;
    if let Some(extra) = header.items.get(2) {
        return malformed(
            extra.span(),
            format!("unexpected `{}` after the {kind} name", describe(extra)),
        );
    }
    if let Some(extra) = top.get(1) {
        return malformed(
            extra.span(),
            format!("unexpected content after the end of the {kind} definition"),
        );
    }
    Ok((def, n, span))
}

/// A section `(:keyword ...)`: its keyword symbol.
fn section<'a>(e: &'a SExpr, file: &str) -> Result<(&'a List, &'a Sym)> {
    let l = list(e, &format!("a {file} section like (:keyword ...)"))?;
    match head(l) {
        Some(h) if h.text.starts_with(':') => Ok((l, h)),
        Some(h) => malformed(
            h.span,
            format!(
                "expected a {file} section keyword like :predicates, found `{}`",
                h.text
            ),
        ),
        None => malformed(
            l.span,
            format!("expected a {file} section like (:keyword ...)"),
        ),
    }
}

fn requirements(l: &List) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for e in &l.items[1..] {
        let s = sym(e, "a requirement keyword")?;
        if let Some((_, what)) = UNSUPPORTED_REQUIREMENTS.iter().find(|(k, _)| *k == s.text) {
            return unsupported(s.span, what);
        }
        if !SUPPORTED_REQUIREMENTS.contains(&s.text.as_str()) {
            return malformed(s.span, format!("unknown requirement `{}`", s.text));
        }
        out.push(s.text.clone());
    }
    Ok(out)
}

fn predicate_decl(e: &SExpr) -> Result<Predicate> {
    let l = list(e, "a predicate declaration like (on ?x ?y)")?;
    let (n, span) = name(nth(l, 0, "a predicate name")?, "predicate name")?;
    let params = typed_list(&l.items[1..], true, "predicate parameter")?;
    Ok(Predicate {
        name: n,
        params,
        span,
    })
}

fn action(l: &List) -> Result<Action> {
    let (n, span) = name(nth(l, 1, "an action name")?, "action name")?;
    let mut params = Vec::new();
    let mut precondition = Vec::new();
    let mut eff = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut i = 2;
    while i < l.items.len() {
        let key = sym(&l.items[i], "an action keyword like :parameters")?;
        let value = match l.items.get(i + 1) {
            Some(v) => v,
            None => return malformed(key.span, format!("`{}` has no value", key.text)),
        };
        if !matches!(
            key.text.as_str(),
            ":parameters" | ":precondition" | ":effect"
        ) {
            if key.text == ":vars" || key.text == ":duration" || key.text == ":condition" {
                return unsupported(key.span, &format!("action keyword {}", key.text));
            }
            return malformed(key.span, format!("unknown action keyword `{}`", key.text));
        }
        once(&mut seen, key)?;
        match key.text.as_str() {
            ":parameters" => {
                let pl = list(value, "a parameter list like (?x - t)")?;
                params = typed_list(&pl.items, true, "parameter")?;
            }
            ":precondition" => condition(value, Ctx::Precondition, &mut precondition)?,
            _ => effect(value, &mut eff)?,
        }
        i += 2;
    }
    Ok(Action {
        name: n,
        params,
        precondition,
        effect: eff,
        span,
    })
}

/// Parses a domain file.
///
/// Accepts sections in any order and a missing `:requirements`. Rejects, with
/// [`ParseErrorKind::Unsupported`], `:functions`, `:durative-action`, `:derived`,
/// `:constraints`, quantifiers, `or`/`imply`, conditional and numeric effects, `either` types and
/// the requirements that announce them.
pub fn parse_domain(src: &str) -> Result<Domain> {
    let top = read(src)?;
    let (def, name, span) = define(&top, "domain")?;
    let mut d = Domain {
        name,
        requirements: Vec::new(),
        types: Vec::new(),
        constants: Vec::new(),
        predicates: Vec::new(),
        actions: Vec::new(),
        span,
    };
    let mut seen = Vec::new();
    for e in &def.items[2..] {
        let (l, kw) = section(e, "domain")?;
        match kw.text.as_str() {
            ":requirements" => {
                once(&mut seen, kw)?;
                d.requirements = requirements(l)?;
            }
            ":types" => {
                once(&mut seen, kw)?;
                d.types = typed_list(&l.items[1..], false, "type name")?;
            }
            ":constants" => {
                once(&mut seen, kw)?;
                d.constants = typed_list(&l.items[1..], false, "constant name")?;
            }
            ":predicates" => {
                once(&mut seen, kw)?;
                for p in &l.items[1..] {
                    d.predicates.push(predicate_decl(p)?);
                }
            }
            ":action" => d.actions.push(action(l)?),
            ":functions" => return unsupported(kw.span, "numeric fluents (:functions)"),
            ":durative-action" => {
                return unsupported(kw.span, "durative actions (:durative-action)")
            }
            ":derived" => return unsupported(kw.span, "derived predicates (:derived)"),
            ":constraints" => {
                return unsupported(kw.span, "state-trajectory constraints (:constraints)")
            }
            ":domain" => return malformed(kw.span, "(:domain ...) belongs in a problem file"),
            other => return malformed(kw.span, format!("unknown domain section `{other}`")),
        }
    }
    Ok(d)
}

/// Parses a problem file.
///
/// `(:domain X)` and `(:goal ...)` are required; `:requirements` is optional. `:metric` and
/// `:constraints` are rejected as [`ParseErrorKind::Unsupported`] (this toolkit has no numeric
/// fluents to minimise, and ignoring a metric would silently change what "solved" means).
pub fn parse_problem(src: &str) -> Result<Problem> {
    let top = read(src)?;
    let (def, problem_name, span) = define(&top, "problem")?;
    let mut domain: Option<(String, Span)> = None;
    let mut requirements_ = Vec::new();
    let mut objects = Vec::new();
    let mut init = Vec::new();
    let mut goal: Option<(Vec<Literal>, Span)> = None;
    let mut seen = Vec::new();
    for e in &def.items[2..] {
        let (l, kw) = section(e, "problem")?;
        match kw.text.as_str() {
            ":domain" => {
                once(&mut seen, kw)?;
                let d = name(nth(l, 1, "the domain name")?, "domain name")?;
                if let Some(extra) = l.items.get(2) {
                    return malformed(extra.span(), "(:domain NAME) takes one name");
                }
                domain = Some(d);
            }
            ":requirements" => {
                once(&mut seen, kw)?;
                requirements_ = requirements(l)?;
            }
            ":objects" => {
                once(&mut seen, kw)?;
                objects = typed_list(&l.items[1..], false, "object name")?;
            }
            ":init" => {
                once(&mut seen, kw)?;
                for f in &l.items[1..] {
                    let fl = list(f, "an initial fact like (on a b)")?;
                    match head(fl).map(|h| h.text.as_str()) {
                        Some("not") => {
                            return malformed(fl.span, "negative literals are not allowed in :init (everything not listed is false)")
                        }
                        Some("=") => {
                            if fl.items.iter().skip(1).any(|x| matches!(x, SExpr::List(_))) {
                                return unsupported(fl.span, "numeric fluents (= (f ...) v) in :init");
                            }
                            return malformed(fl.span, "equality atoms are not allowed in :init");
                        }
                        Some("at") if fl.items.len() > 1 && matches!(fl.items[1], SExpr::Sym(ref s) if s.text.parse::<f64>().is_ok()) => {
                            return unsupported(fl.span, "timed initial literals (at T ...)");
                        }
                        Some("and") => return malformed(fl.span, ":init is a list of atoms; `and` is not allowed"),
                        _ => {}
                    }
                    init.push(atom(fl, false, ":init")?);
                }
            }
            ":goal" => {
                once(&mut seen, kw)?;
                let g = nth(l, 1, "a goal condition")?;
                if let Some(extra) = l.items.get(2) {
                    return malformed(
                        extra.span(),
                        "(:goal ...) takes one condition; wrap several in (and ...)",
                    );
                }
                let mut lits = Vec::new();
                condition(g, Ctx::Goal, &mut lits)?;
                goal = Some((lits, l.span));
            }
            ":metric" => return unsupported(kw.span, "plan metrics (:metric)"),
            ":constraints" => {
                return unsupported(kw.span, "state-trajectory constraints (:constraints)")
            }
            other => return malformed(kw.span, format!("unknown problem section `{other}`")),
        }
    }
    let Some((domain_name, domain_span)) = domain else {
        return malformed(span, "problem has no (:domain NAME) section");
    };
    let Some((goal, goal_span)) = goal else {
        return malformed(def.end, "problem has no (:goal ...) section");
    };
    Ok(Problem {
        name: problem_name,
        domain_name,
        requirements: requirements_,
        objects,
        init,
        goal,
        span,
        domain_span,
        goal_span,
    })
}

/// Parses a sequential plan as Fast Downward writes it: one `(action arg ...)` per line, `;`
/// comments, blank lines, any case. An IPC-style `N:` step prefix is accepted too.
pub fn parse_plan(src: &str) -> Result<Plan> {
    let top = read(src)?;
    let mut steps = Vec::with_capacity(top.len());
    for e in &top {
        let l = match e {
            SExpr::List(l) => l,
            SExpr::Sym(s)
                if s.text.ends_with(':') && s.text[..s.text.len() - 1].parse::<f64>().is_ok() =>
            {
                continue
            }
            SExpr::Sym(s) => {
                return malformed(
                    s.span,
                    format!(
                        "expected a plan step like (action arg ...), found `{}`",
                        s.text
                    ),
                )
            }
        };
        let (action, _) = name(nth(l, 0, "an action name")?, "action name")?;
        let mut args = Vec::with_capacity(l.items.len() - 1);
        for a in &l.items[1..] {
            args.push(name(a, "object name")?.0);
        }
        steps.push(PlanStep {
            action,
            args,
            span: l.span,
        });
    }
    Ok(Plan { steps })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::OBJECT;

    const BW: &str = "(define (domain BW)
  (:requirements :strips :typing :negative-preconditions :equality)
  (:types block - object table)
  (:constants t0 - table)
  (:predicates (on ?x - block ?y - block) (clear ?x - block) (handempty) (holding ?x - block))
  (:action Stack
    :parameters (?x ?y - block)
    :precondition (and (holding ?x) (clear ?y) (not (= ?x ?y)))
    :effect (and (on ?x ?y) (not (holding ?x)) (not (clear ?y)) (clear ?x) (handempty))))";

    const BW_P: &str = "; a problem
(define (problem p1) (:domain bw)
  (:objects A B - block c)
  (:init (clear a) (holding b) (handempty))
  (:goal (and (on b a) (not (holding b)))))";

    fn err(r: Result<impl std::fmt::Debug>) -> ParseError {
        r.expect_err("expected a parse error")
    }

    #[test]
    fn parses_a_typed_domain() {
        let d = parse_domain(BW).unwrap();
        assert_eq!(d.name, "bw");
        assert_eq!(d.requirements.len(), 4);
        assert_eq!(
            d.types
                .iter()
                .map(|t| (t.name.as_str(), t.ty.as_str()))
                .collect::<Vec<_>>(),
            [("block", "object"), ("table", "object")]
        );
        assert_eq!(d.constants[0].ty, "table");
        assert_eq!(d.predicates.len(), 4);
        let a = &d.actions[0];
        assert_eq!(a.name, "stack");
        assert_eq!(a.span, Span::new(6, 12));
        assert_eq!(
            a.params.iter().map(|p| p.ty.as_str()).collect::<Vec<_>>(),
            ["block", "block"]
        );
        assert_eq!(a.precondition.len(), 3);
        assert!(a.precondition[2].atom.is_equality() && !a.precondition[2].positive);
        assert_eq!(a.effect.iter().filter(|l| !l.positive).count(), 2);
    }

    #[test]
    fn parses_a_problem_lowercasing_names() {
        let p = parse_problem(BW_P).unwrap();
        assert_eq!((p.name.as_str(), p.domain_name.as_str()), ("p1", "bw"));
        assert_eq!(
            p.objects
                .iter()
                .map(|o| (o.name.as_str(), o.ty.as_str()))
                .collect::<Vec<_>>(),
            [("a", "block"), ("b", "block"), ("c", "object")]
        );
        assert_eq!(p.init.len(), 3);
        assert_eq!(p.goal.len(), 2);
        assert_eq!(p.goal[1].to_string(), "(not (holding b))");
        assert_eq!(p.domain_span, Span::new(2, 31));
    }

    #[test]
    fn parses_untyped_domain_without_requirements() {
        let d = parse_domain("(define (domain d) (:predicates (p ?x)) (:action a :parameters (?x) :precondition () :effect (p ?x)))").unwrap();
        assert_eq!(d.predicates[0].params[0].ty, OBJECT);
        assert!(d.actions[0].precondition.is_empty());
        assert!(d.requirements.is_empty());
    }

    #[test]
    fn round_trips_through_display() {
        let d = parse_domain(BW).unwrap();
        assert_eq!(parse_domain(&d.to_string()).unwrap(), d);
        let p = parse_problem(BW_P).unwrap();
        assert_eq!(parse_problem(&p.to_string()).unwrap(), p);
        let plan = parse_plan("(Stack B A)\n(noop)\n").unwrap();
        assert_eq!(plan.to_string(), "(stack b a)\n(noop)\n");
        assert_eq!(parse_plan(&plan.to_string()).unwrap(), plan);
    }

    #[test]
    fn parses_fast_downward_plans() {
        let p = parse_plan("(unstack b a)\n\n(PUT-DOWN b)\n; cost = 2 (unit cost)\n").unwrap();
        assert_eq!(p.steps.len(), 2);
        assert_eq!(p.steps[1].to_string(), "(put-down b)");
        assert_eq!(p.steps[1].span, Span::new(3, 1));
        assert_eq!(parse_plan("0: (a x)\n1: (b)").unwrap().steps.len(), 2);
        assert!(parse_plan("").unwrap().steps.is_empty());
        let e = err(parse_plan("(a b)\nfoo"));
        assert_eq!(e.span(), Span::new(2, 1));
        let e = err(parse_plan("(a (b))"));
        assert_eq!(e.span(), Span::new(1, 4));
    }

    #[test]
    fn every_unsupported_construct_is_named() {
        let dom = |body: &str| format!("(define (domain d) (:predicates (p ?x) (q)) {body})");
        let act = |pre: &str, eff: &str| {
            dom(&format!(
                "(:action a :parameters (?x) :precondition {pre} :effect {eff})"
            ))
        };
        let cases: Vec<(String, &str)> = vec![
            (act("(p ?x)", "(when (p ?x) (q))"), "conditional effects"),
            (act("(forall (?y) (p ?y))", "(q)"), "forall"),
            (act("(exists (?y) (p ?y))", "(q)"), "exists"),
            (act("(or (p ?x) (q))", "(q)"), "disjunctive"),
            (act("(imply (p ?x) (q))", "(q)"), "imply"),
            (act("(not (and (p ?x) (q)))", "(q)"), "negated conjunctions"),
            (act("(> (f ?x) 0)", "(q)"), "numeric comparisons"),
            (act("(p ?x)", "(increase (total-cost) 1)"), "numeric effects"),
            (act("(p ?x)", "(forall (?y) (p ?y))"), "quantified effects"),
            (act("(p (f ?x))", "(q)"), "function terms"),
            (dom("(:functions (f ?x))"), ":functions"),
            (dom("(:durative-action a :parameters () :duration (= ?duration 1) :condition () :effect ())"), "durative"),
            (dom("(:derived (q) (p a))"), "derived"),
            ("(define (domain d) (:requirements :strips :conditional-effects))".into(), "conditional effects"),
            ("(define (domain d) (:requirements :fluents))".into(), "numeric fluents"),
            ("(define (domain d) (:types a - (either b c)))".into(), "either"),
            ("(define (domain d) (:constants x - (either b c)))".into(), "either"),
        ];
        for (src, construct) in cases {
            let e = err(parse_domain(&src));
            assert_eq!(e.kind(), ParseErrorKind::Unsupported, "{src}: {e}");
            assert!(e.message().contains(construct), "{src}: {e}");
            assert!(e.span().line >= 1 && e.span().column >= 1);
        }
        let prob = |s: &str| {
            format!("(define (problem p) (:domain d) (:objects a) (:init (p a)) (:goal (p a)) {s})")
        };
        for (src, construct) in [
            (prob("(:metric minimize (total-cost))"), "metric"),
            (prob("(:constraints (always (p a)))"), "constraints"),
        ] {
            let e = err(parse_problem(&src));
            assert_eq!(e.kind(), ParseErrorKind::Unsupported);
            assert!(e.message().contains(construct), "{e}");
        }
        let e = err(parse_problem(
            "(define (problem p) (:domain d) (:init (= (total-cost) 0)) (:goal (p a)))",
        ));
        assert_eq!(e.kind(), ParseErrorKind::Unsupported);
        let e = err(parse_problem(
            "(define (problem p) (:domain d) (:goal (exists (?x) (p ?x))))",
        ));
        assert_eq!(e.kind(), ParseErrorKind::Unsupported);
    }

    #[test]
    fn errors_point_at_the_offending_token() {
        let e = err(parse_domain("(define (domain d)\n  (:predicates (p ?x))\n  (:action a :parameters (?x) :effect (p ?x) :cost 3))"));
        assert_eq!(e.span(), Span::new(3, 46));
        assert!(e.message().contains(":cost"));
        let e = err(parse_domain("(define (domain d) (:predicates (p x)))"));
        assert_eq!(e.span(), Span::new(1, 36));
        let e = err(parse_domain("(define (problem d))"));
        assert!(e.message().contains("found a problem definition"), "{e}");
        let e = err(parse_problem(
            "(define (problem p) (:domain d) (:objects a) (:init (p a)))",
        ));
        assert!(e.message().contains("no (:goal"), "{e}");
        let e = err(parse_problem(
            "(define (problem p) (:domain d) (:init (p ?x)) (:goal (p a)))",
        ));
        assert_eq!(e.span(), Span::new(1, 43));
        let e = err(parse_problem(
            "(define (problem p) (:domain d) (:init (not (p a))) (:goal (p a)))",
        ));
        assert!(e.message().contains("negative"), "{e}");
        let e = err(parse_domain("(define (domain d) (:types a - ))"));
        assert!(e.message().contains("after `-`"), "{e}");
        let e = err(parse_domain(
            "(define (domain d) (:predicates) (:predicates))",
        ));
        assert!(e.message().contains("more than once"), "{e}");
        let e = err(parse_domain("(define (domain d)) (extra)"));
        assert!(e.message().contains("after the end"), "{e}");
        let e = err(parse_domain(""));
        assert_eq!(e.kind(), ParseErrorKind::UnexpectedEof);
        let e = err(parse_domain(
            "(define (domain d) (:requirements :strips :foo))",
        ));
        assert!(e.message().contains(":foo"));
        assert_eq!(
            e.to_string(),
            "line 1, column 43: unknown requirement `:foo`"
        );
        let d = e.to_diagnostic(crate::SpecFile::Domain);
        assert_eq!(
            (d.category, d.line, d.column),
            (crate::Category::Syntax, Some(1), Some(43))
        );
    }
}
