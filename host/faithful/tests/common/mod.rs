//! The constructed cases, shared by the native and the WASM tests: each pairs a reference spec
//! from the benchmark data with a candidate built from it, and says what the checker must find.
#![allow(dead_code)]

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use onebrain_core::{Decision, Drift, FaithfulnessReport, Spec};
use onebrain_pddl::{ground, parse_domain, parse_plan, parse_problem, validate};

/// `../shared/data` from the project root, or `$ONEBRAIN_DATA`.
pub fn data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("ONEBRAIN_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    if dir.join("planbench").is_dir() && dir.join("planetarium").is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: benchmark data not found at {} (set ONEBRAIN_DATA)", dir.display());
        None
    }
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// PlanBench writes BlocksWorld plans with colour names; `encoded_objects` in
/// `prompts/blocksworld_config.yaml` maps them back to the PDDL objects.
const COLOURS: &[(&str, &str)] = &[
    ("red", "a"),
    ("blue", "b"),
    ("orange", "c"),
    ("yellow", "d"),
    ("white", "e"),
    ("magenta", "f"),
    ("black", "g"),
    ("cyan", "h"),
    ("green", "i"),
    ("violet", "j"),
    ("silver", "k"),
    ("gold", "l"),
];

fn plan_steps(text: &str) -> Vec<String> {
    let colours = map(COLOURS);
    text.lines().map(|l| rename(l.trim(), &colours)).filter(|l| !l.is_empty()).collect()
}

/// A PlanBench row: (domain text, problem text, ground-truth plan).
pub fn planbench(data: &PathBuf, config: &str, nl_file: &str, instance: u64) -> (String, String, Vec<String>) {
    let dir = data.join("planbench").join(config);
    let f = std::fs::File::open(dir.join(nl_file)).unwrap();
    for line in BufReader::new(f).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["instance_id"].as_u64() == Some(instance) {
            let plan = plan_steps(v["ground_truth_plan"].as_str().unwrap());
            return (
                read(dir.join(v["domain_pddl"].as_str().unwrap())),
                read(dir.join(v["problem_pddl"].as_str().unwrap())),
                plan,
            );
        }
    }
    panic!("instance {instance} not in {config}/{nl_file}");
}

/// All PlanBench rows of one file, as (id, domain, problem, plan).
pub fn planbench_all(data: &PathBuf, config: &str, nl_file: &str) -> Vec<(u64, String, String, Vec<String>)> {
    let dir = data.join("planbench").join(config);
    let f = std::fs::File::open(dir.join(nl_file)).unwrap();
    let domain = read(dir.join("domain.pddl"));
    BufReader::new(f)
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            let plan = plan_steps(v["ground_truth_plan"].as_str().unwrap());
            (v["instance_id"].as_u64().unwrap(), domain.clone(), read(dir.join(v["problem_pddl"].as_str().unwrap())), plan)
        })
        .collect()
}

/// The first Planetarium rows of `domain` (`blocksworld`/`gripper`) accepted by `keep`, as
/// (domain text, problem text).
pub fn planetarium(data: &PathBuf, domain: &str, n: usize, keep: impl Fn(&serde_json::Value) -> bool) -> Vec<(String, String)> {
    let dir = data.join("planetarium");
    let d = read(dir.join("domains").join(format!("{domain}.pddl")));
    let f = std::fs::File::open(dir.join(format!("{domain}-train.jsonl.gz"))).unwrap();
    let mut out = Vec::new();
    for line in BufReader::new(flate2::read::GzDecoder::new(f)).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if keep(&v) {
            out.push((d.clone(), v["problem_pddl"].as_str().unwrap().to_string()));
            if out.len() == n {
                break;
            }
        }
    }
    out
}

/// Replaces whole symbols (between spaces and parentheses), after lower-casing.
pub fn rename(text: &str, map: &HashMap<String, String>) -> String {
    let text = text.to_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut tok = String::new();
    let flush = |tok: &mut String, out: &mut String| {
        if !tok.is_empty() {
            out.push_str(map.get(tok.as_str()).map_or(tok.as_str(), |s| s.as_str()));
            tok.clear();
        }
    };
    for c in text.chars() {
        if c.is_whitespace() || c == '(' || c == ')' {
            flush(&mut tok, &mut out);
            out.push(c);
        } else {
            tok.push(c);
        }
    }
    flush(&mut tok, &mut out);
    out
}

pub fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// Renames every object of `problem` to `o<i>`, in reverse declaration order so that no
/// position survives, and returns the map.
pub fn object_renaming(problem: &str) -> HashMap<String, String> {
    let p = parse_problem(problem).unwrap();
    let n = p.objects.len();
    p.objects.iter().enumerate().map(|(i, o)| (o.name.clone(), format!("obj{}", n - i))).collect()
}

/// A plan for `spec` by greedy best-first search (goal count), for rows that come without one.
pub fn plan_for(spec: &Spec) -> Vec<String> {
    let d = parse_domain(&spec.domain).unwrap();
    let p = parse_problem(&spec.problem).unwrap();
    let t = ground(&d, &p).unwrap();
    let h = |s: &onebrain_pddl::State| t.goal_pos().iter().filter(|&&a| !s.contains(a)).count();
    let mut seen = HashSet::new();
    let mut nodes: Vec<(onebrain_pddl::State, Option<(usize, usize)>)> = vec![(t.init().clone(), None)];
    let mut heap = BinaryHeap::new();
    heap.push((std::cmp::Reverse(h(t.init())), std::cmp::Reverse(0usize)));
    seen.insert(t.init().clone());
    while let Some((_, std::cmp::Reverse(i))) = heap.pop() {
        let s = nodes[i].0.clone();
        if t.is_goal(&s) {
            let mut steps = Vec::new();
            let mut k = i;
            while let Some((parent, a)) = nodes[k].1 {
                steps.push(t.actions()[a].to_string());
                k = parent;
            }
            steps.reverse();
            return steps;
        }
        for a in t.applicable(&s).collect::<Vec<_>>() {
            let n = t.apply(&s, a);
            if seen.insert(n.clone()) {
                heap.push((std::cmp::Reverse(h(&n)), std::cmp::Reverse(nodes.len())));
                nodes.push((n, Some((i, a))));
            }
        }
        assert!(nodes.len() < 2_000_000, "test planner gave up");
    }
    panic!("unsolvable test task");
}

/// True when `plan` is valid for `spec`: candidates are built so that the plan given is the
/// one a planner could have found for them.
pub fn plan_valid(spec: &Spec, plan: &[String]) -> bool {
    let d = parse_domain(&spec.domain).unwrap();
    let p = parse_problem(&spec.problem).unwrap();
    validate(&d, &p, &parse_plan(&plan.join("\n")).unwrap()).valid
}

/// What the checker must report.
#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub faithful: bool,
    pub drift: Option<Drift>,
    pub goal: bool,
    pub objects: bool,
    pub schema: bool,
    pub replay: bool,
    /// A substring some explanation line must contain.
    pub explains: Option<&'static str>,
}

pub const FAITHFUL: Expect =
    Expect { faithful: true, drift: None, goal: true, objects: true, schema: true, replay: true, explains: None };

pub struct Case {
    pub name: String,
    pub reference: Spec,
    pub candidate: Spec,
    pub plan: Vec<String>,
    pub expect: Expect,
}

impl Case {
    /// Panics with the whole report when the checker's answer differs from the expectation.
    pub fn assert(&self, r: &FaithfulnessReport) {
        let e = &self.expect;
        let got = (r.faithful, r.drift, r.goal_preserved, r.objects_preserved, r.schema_consistent, r.plan_replay_ok);
        let want = (e.faithful, e.drift, e.goal, e.objects, e.schema, e.replay);
        assert_eq!(got, want, "{}: (faithful, drift, goal, objects, schema, replay) differ\n{r:#?}", self.name);
        assert!(r.solvable, "{}", self.name);
        assert_ne!(r.decision, Decision::Undecided, "{}: {r:#?}", self.name);
        if e.schema {
            assert_eq!(r.schema_f1, 1.0, "{}", self.name);
        } else {
            assert!(r.schema_f1 < 1.0, "{}: {r:#?}", self.name);
        }
        if let Some(s) = e.explains {
            assert!(r.explanation.iter().any(|l| l.contains(s)), "{}: no explanation contains {s:?}\n{r:#?}", self.name);
        }
        if !e.faithful {
            assert!(!r.explanation.is_empty(), "{}: an unfaithful report must say why", self.name);
        }
    }
}

/// Applies `f` to the goal section of `problem` only (facts recur in the init).
fn edit_goal(problem: &str, f: impl Fn(&str) -> String) -> String {
    let p = problem.to_lowercase();
    let at = p.find("(:goal").expect("a goal section");
    format!("{}{}", &p[..at], f(&p[at..]))
}

fn spec(d: &str, p: &str) -> Spec {
    Spec { domain: d.to_string(), problem: p.to_string() }
}

fn case(name: &str, reference: &Spec, candidate: Spec, plan: Vec<String>, expect: Expect) -> Case {
    assert!(plan_valid(&candidate, &plan), "{name}: the plan given must solve the candidate");
    Case { name: name.to_string(), reference: reference.clone(), candidate, plan, expect }
}

const BW_PREDS_TO_MYSTERY: &[(&str, &str)] = &[
    ("clear", "province"),
    ("ontable", "planet"),
    ("handempty", "harmony"),
    ("holding", "pain"),
    ("on", "craves"),
    ("pick-up", "attack"),
    ("put-down", "succumb"),
    ("stack", "overcome"),
    ("unstack", "feast"),
    ("blocksworld-4ops", "mystery-4ops"),
];

/// Every constructed case. Needs the data; `None` when it is absent.
pub fn cases() -> Option<Vec<Case>> {
    let data = data_dir()?;
    let mut out = Vec::new();

    // ---- PlanBench BlocksWorld, instance 2: goal (on orange red) in colour words; in PDDL
    // a single `on` fact. Instance 3 has a three-fact goal.
    let (d, p, plan) = planbench(&data, "blocksworld", "nl_tasks_blocksworld.jsonl", 3);
    let r = spec(&d, &p);
    let goal = parse_problem(&p).unwrap().goal;
    assert!(goal.len() >= 2, "instance 3 has a multi-fact goal");
    out.push(case("bw/self", &r, r.clone(), plan.clone(), FAITHFUL));

    // The real Mystery domain file, the instance's facts in its vocabulary, every object renamed.
    let mystery = read(data.join("planbench/mystery_blocksworld/domain.pddl"));
    let mut m = map(BW_PREDS_TO_MYSTERY);
    m.extend(object_renaming(&p));
    out.push(case("bw/mystery-renaming", &r, spec(&mystery, &rename(&p, &m)), plan.iter().map(|s| rename(s, &m)).collect(), FAITHFUL));

    // Implied facts added: (on x y) implies (not (ontable x)) and (not (holding x)).
    let extra: String = goal.iter().map(|l| format!(" (not (ontable {0})) (not (holding {0}))", l.atom.args[0].name)).collect();
    let added = p.to_lowercase().replacen("(:goal\n(and\n", &format!("(:goal\n(and\n{extra}\n"), 1);
    assert_ne!(added, p.to_lowercase(), "goal rewrite applied");
    out.push(case("bw/implied-goal-facts-added", &r, spec(&d, &added), plan.clone(), FAITHFUL));

    // A dropped goal fact: solvable by a shorter plan, weaker.
    let dropped_fact = goal[0].to_string();
    let weaker = edit_goal(&p, |g| g.replacen(&dropped_fact, "", 1));
    let weaker_spec = spec(&d, &weaker);
    let weaker_plan = plan_for(&weaker_spec);
    let replay = plan_valid(&r, &weaker_plan);
    out.push(case(
        "bw/dropped-goal-fact",
        &r,
        weaker_spec,
        weaker_plan,
        Expect { faithful: false, drift: Some(Drift::GoalWeakening), goal: false, replay, explains: Some("is not implied by the candidate goal"), ..FAITHFUL },
    ));

    // An extra block on the table.
    let extra_obj = p.to_lowercase().replacen("(:objects", "(:objects zz", 1).replacen("(:init", "(:init (ontable zz) (clear zz)", 1);
    out.push(case(
        "bw/extra-object",
        &r,
        spec(&d, &extra_obj),
        plan.clone(),
        Expect { faithful: false, drift: Some(Drift::TypeDrift), goal: false, objects: false, replay: false, explains: Some("objects"), ..FAITHFUL },
    ));

    // `stack` without (clear ?underob): the ground-truth plan still works.
    let d_low = d.to_lowercase();
    let no_clear = d_low.replacen("(and (clear ?underob) (holding ?ob))", "(holding ?ob)", 1);
    assert_ne!(no_clear, d_low);
    out.push(case(
        "bw/removed-precondition",
        &r,
        spec(&no_clear, &p),
        plan.clone(),
        Expect {
            faithful: false,
            drift: Some(Drift::ConstraintOmission),
            schema: false,
            explains: Some("action `stack` lacks the precondition (clear ?underob)"),
            ..FAITHFUL
        },
    ));

    // `stack` adds (clear ?underob) and deletes (clear ?ob): add and delete swapped.
    let swapped = d_low.replacen(
        "(and (handempty) (clear ?ob) (on ?ob ?underob)\n               (not (clear ?underob)) (not (holding ?ob)))",
        "(and (handempty) (clear ?underob) (on ?ob ?underob)\n               (not (clear ?ob)) (not (holding ?ob)))",
        1,
    );
    assert_ne!(swapped, d_low);
    let swapped_spec = spec(&swapped, &p);
    let swapped_plan = plan_for(&swapped_spec);
    let replay_ok = plan_valid(&r, &swapped_plan);
    out.push(case(
        "bw/swapped-add-delete",
        &r,
        swapped_spec,
        swapped_plan,
        Expect { faithful: false, drift: Some(Drift::SchemaDrift), schema: false, replay: replay_ok, explains: Some("extra delete effect (clear ?ob)"), ..FAITHFUL },
    ));

    // A changed initial state: a clear block that sits on another is put on the table.
    let pr = parse_problem(&p).unwrap();
    let moved = pr
        .init
        .iter()
        .find(|a| a.predicate == "on" && pr.init.iter().any(|c| c.predicate == "clear" && c.args[0] == a.args[0]))
        .expect("instance 3 has a clear block on another");
    let (x, y) = (moved.args[0].name.clone(), moved.args[1].name.clone());
    let changed = p.to_lowercase().replacen(&format!("(on {x} {y})"), &format!("(ontable {x}) (clear {y})"), 1);
    let changed_spec = spec(&d, &changed);
    let changed_plan = plan_for(&changed_spec);
    out.push(case(
        "bw/changed-init",
        &r,
        changed_spec,
        changed_plan,
        Expect {
            faithful: false,
            drift: None,
            goal: false,
            replay: false,
            explains: Some("initial state differs"),
            ..FAITHFUL
        },
    ));

    // Solvable only because the domain is broken: `stack` needs nothing held, so the goal
    // block can be stacked straight from wherever it is; that plan fails in the reference.
    let (d1, p1, _) = planbench(&data, "blocksworld", "nl_tasks_blocksworld.jsonl", 2);
    let r1 = spec(&d1, &p1);
    let broken = d1.to_lowercase().replacen("(and (clear ?underob) (holding ?ob))", "(clear ?underob)", 1);
    let broken_spec = spec(&broken, &p1);
    let broken_plan = plan_for(&broken_spec);
    assert!(!plan_valid(&r1, &broken_plan), "the broken domain's plan must not work in the reference");
    out.push(case(
        "bw/solvable-only-because-broken",
        &r1,
        broken_spec,
        broken_plan,
        Expect {
            faithful: false,
            drift: Some(Drift::ConstraintOmission),
            schema: false,
            replay: false,
            explains: Some("plan replay fails at step 1"),
            ..FAITHFUL
        },
    ));

    // ---- PlanBench Logistics (untyped; types are one-place predicates).
    let (d, p, plan) = planbench(&data, "logistics", "nl_tasks_logistics.jsonl", 2);
    let r = spec(&d, &p);
    out.push(case("logistics/self", &r, r.clone(), plan.clone(), FAITHFUL));
    let mut m = map(&[
        ("obj", "parcel"),
        ("truck", "lorry"),
        ("airplane", "plane"),
        ("location", "place"),
        ("at", "located"),
        ("in", "inside"),
        ("in-city", "within"),
        ("load-truck", "lt"),
        ("unload-truck", "ut"),
        ("load-airplane", "la"),
        ("unload-airplane", "ua"),
        ("drive-truck", "dt"),
        ("fly-airplane", "fa"),
    ]);
    m.extend(object_renaming(&p));
    out.push(case("logistics/renaming", &r, spec(&rename(&d, &m), &rename(&p, &m)), plan.iter().map(|s| rename(s, &m)).collect(), FAITHFUL));
    // A truck declared an airplane.
    let retyped = p.to_lowercase().replacen("(truck t0)", "(airplane t0)", 1);
    assert_ne!(retyped, p.to_lowercase());
    let retyped_spec = spec(&d, &retyped);
    let retyped_plan = plan_for(&retyped_spec);
    out.push(case(
        "logistics/retyped-object",
        &r,
        retyped_spec,
        retyped_plan,
        Expect { faithful: false, drift: Some(Drift::TypeDrift), goal: false, objects: false, replay: false, explains: Some("types"), ..FAITHFUL },
    ));

    // ---- Planetarium BlocksWorld: fully specified goals; small rows are decided exactly,
    // larger ones by closure.
    for (size, name) in [(4, "small"), (9, "medium")] {
        let rows = planetarium(&data, "blocksworld", 1, |v| v["num_objects"] == size && v["goal"] == "tower" && v["init"] == "on_table");
        let (d, p) = &rows[0];
        let r = spec(d, p);
        let plan = plan_for(&r);
        out.push(case(&format!("planetarium-bw-{name}/self"), &r, r.clone(), plan.clone(), FAITHFUL));
        // Implied facts left out: every `clear` and `arm-empty` of the goal.
        let pr = parse_problem(p).unwrap();
        let lean = edit_goal(p, |g| {
            let mut g = g.to_string();
            for l in pr.goal.iter().filter(|l| l.atom.predicate == "clear" || l.atom.predicate == "arm-empty") {
                g = g.replacen(&l.to_string(), "", 1);
            }
            g
        });
        assert_ne!(lean, p.to_lowercase());
        out.push(case(&format!("planetarium-bw-{name}/implied-goal-facts-omitted"), &r, spec(d, &lean), plan.clone(), FAITHFUL));
        // Renamed, and typed (`block`), which carries no information.
        let mut m = map(&[("on", "atop"), ("clear", "free"), ("on-table", "down"), ("arm-empty", "idle"), ("holding", "grip")]);
        m.extend(object_renaming(p));
        let typed = rename(d, &m)
            .replacen("(:requirements :strips)", "(:requirements :strips :typing) (:types block)", 1)
            .replace(":parameters (?ob)", ":parameters (?ob - block)")
            .replace(":parameters (?ob ?underob)", ":parameters (?ob ?underob - block)");
        assert_eq!(typed.matches("- block)").count(), 4, "{typed}");
        let typed_problem = rename(p, &m).replacen("(:objects", "(:objects", 1);
        let typed_problem = {
            let pp = parse_problem(&typed_problem).unwrap();
            let names: Vec<String> = pp.objects.iter().map(|o| o.name.clone()).collect();
            typed_problem.replacen(&format!("(:objects {})", names.join(" ")), &format!("(:objects {} - block)", names.join(" ")), 1)
        };
        assert!(typed_problem.contains(" - block)"), "{typed_problem}");
        let c = spec(&typed, &typed_problem);
        out.push(case(&format!("planetarium-bw-{name}/typed-renaming"), &r, c, plan.iter().map(|s| rename(s, &m)).collect(), FAITHFUL));
        // A goal `on` fact dropped.
        let on = pr.goal.iter().find(|l| l.atom.predicate == "on").unwrap().to_string();
        let weaker = spec(d, &edit_goal(p, |g| g.replacen(&on, "", 1)));
        let weaker_plan = plan_for(&weaker);
        let replay = plan_valid(&r, &weaker_plan);
        out.push(case(
            &format!("planetarium-bw-{name}/dropped-goal-fact"),
            &r,
            weaker,
            weaker_plan,
            Expect { faithful: false, drift: Some(Drift::GoalWeakening), goal: false, replay, explains: Some("not implied"), ..FAITHFUL },
        ));
    }

    // ---- Planetarium Gripper (untyped, type predicates), and a typed rewrite of it.
    let rows = planetarium(&data, "gripper", 1, |v| v["num_objects"] == 6 && v["goal_is_abstract"] == 0 && v["init_is_abstract"] == 0);
    let (d, p) = &rows[0];
    let r = spec(d, p);
    let plan = plan_for(&r);
    out.push(case("gripper/self", &r, r.clone(), plan.clone(), FAITHFUL));
    let typed_domain = "(define (domain gripper-typed) (:requirements :strips :typing) (:types room ball gripper)
      (:predicates (at-robby ?r - room) (at ?b - ball ?r - room) (free ?g - gripper) (carry ?o - ball ?g - gripper))
      (:action move :parameters (?from ?to - room) :precondition (at-robby ?from)
        :effect (and (at-robby ?to) (not (at-robby ?from))))
      (:action pick :parameters (?obj - ball ?room - room ?gripper - gripper)
        :precondition (and (at ?obj ?room) (at-robby ?room) (free ?gripper))
        :effect (and (carry ?obj ?gripper) (not (at ?obj ?room)) (not (free ?gripper))))
      (:action drop :parameters (?obj - ball ?room - room ?gripper - gripper)
        :precondition (and (carry ?obj ?gripper) (at-robby ?room))
        :effect (and (at ?obj ?room) (free ?gripper) (not (carry ?obj ?gripper)))))";
    let pr = parse_problem(p).unwrap();
    let typed_of = |kind: &str| -> Vec<String> {
        pr.init.iter().filter(|a| a.predicate == kind).map(|a| a.args[0].name.clone()).collect()
    };
    let objects = format!(
        "{} - room {} - ball {} - gripper",
        typed_of("room").join(" "),
        typed_of("ball").join(" "),
        typed_of("gripper").join(" ")
    );
    let init: Vec<String> = pr.init.iter().filter(|a| !["room", "ball", "gripper"].contains(&a.predicate.as_str())).map(|a| a.to_string()).collect();
    let goal: Vec<String> = pr.goal.iter().map(|l| l.to_string()).collect();
    let typed_problem = format!(
        "(define (problem t) (:domain gripper-typed) (:objects {objects}) (:init {}) (:goal (and {})))",
        init.join(" "),
        goal.join(" ")
    );
    out.push(case("gripper/typed-rewrite", &r, spec(typed_domain, &typed_problem), plan.clone(), FAITHFUL));
    // An extra ball, in the first room.
    let room = typed_of("room")[0].clone();
    let extra = p.to_lowercase().replacen("(:objects", "(:objects ballx", 1).replacen("(:init", &format!("(:init (ball ballx) (at ballx {room})"), 1);
    let extra_spec = spec(d, &extra);
    let extra_plan = plan_for(&extra_spec);
    out.push(case(
        "gripper/extra-object",
        &r,
        extra_spec,
        extra_plan,
        Expect { faithful: false, drift: Some(Drift::TypeDrift), goal: false, objects: false, replay: false, explains: Some("objects"), ..FAITHFUL },
    ));
    Some(out)
}
