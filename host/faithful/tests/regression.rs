//! Regression tests for the checker: goal closure added facts the candidate's goal does not
//! imply, and in problem mode a permutation of the domain's predicates passed for a renaming.

mod common;

use std::collections::HashMap;

use onebrain_core::{Decision, FaithfulnessReport, Spec};
use onebrain_faithful::{check, Limits};
use onebrain_pddl::parse_problem;

// ---- BlocksWorld tasks built from Planetarium rows -------------------------------------

/// Towers, each listed bottom to top.
type Towers = Vec<Vec<String>>;

/// The towers of a Planetarium problem's initial state (arm empty).
fn towers_of(problem: &str) -> Towers {
    let p = parse_problem(problem).unwrap();
    let mut above: HashMap<String, String> = HashMap::new();
    let mut bottoms = Vec::new();
    for a in &p.init {
        match a.predicate.as_str() {
            "on" => {
                above.insert(a.args[1].name.clone(), a.args[0].name.clone());
            }
            "on-table" => bottoms.push(a.args[0].name.clone()),
            _ => {}
        }
    }
    bottoms
        .into_iter()
        .map(|b| {
            let mut t = vec![b];
            while let Some(x) = above.get(t.last().unwrap()) {
                t.push(x.clone());
            }
            t
        })
        .collect()
}

/// A fully specified goal, in Planetarium's order: the arm, then each tower's top, stack
/// and bottom.
fn goal_of(towers: &Towers) -> Vec<String> {
    let mut g = vec!["(arm-empty)".to_string()];
    for t in towers {
        g.push(format!("(clear {})", t.last().unwrap()));
        for w in t.windows(2).rev() {
            g.push(format!("(on {} {})", w[1], w[0]));
        }
        g.push(format!("(on-table {})", t[0]));
    }
    g
}

fn with_goal(problem: &str, goal: &[String]) -> String {
    let at = problem.find("(:goal").expect("a goal section");
    format!("{}(:goal (and {}))\n)", &problem[..at], goal.join(" "))
}

/// Each tower upside down.
fn invert(t: &Towers) -> Towers {
    t.iter().map(|x| x.iter().rev().cloned().collect()).collect()
}

/// The first two towers trade their bottom blocks.
fn swap(t: &Towers) -> Towers {
    let mut s = t.clone();
    let (a, b) = (s[0][0].clone(), s[1][0].clone());
    s[0][0] = b;
    s[1][0] = a;
    s
}

/// Everything onto the table, then every goal tower built bottom up: a plan for any goal
/// these towers satisfy.
fn bw_plan(init: &Towers, goal: &Towers) -> Vec<String> {
    let mut plan = Vec::new();
    for t in init {
        for w in t.windows(2).rev() {
            plan.push(format!("(unstack {} {})", w[1], w[0]));
            plan.push(format!("(putdown {})", w[1]));
        }
    }
    for t in goal {
        for w in t.windows(2) {
            plan.push(format!("(pickup {})", w[1]));
            plan.push(format!("(stack {} {})", w[1], w[0]));
        }
    }
    plan
}

/// What supports a block in a BlocksWorld state.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Support {
    Table,
    Held,
    On(usize),
}

/// An independent oracle: does some BlocksWorld state satisfy every fact of `goal` and
/// violate `fact`? Every configuration (towers, at most one block held) is reachable from
/// every other, so "reachable" is "a configuration": found here by backtracking over each
/// block's support, with no planner and none of the checker's code.
fn bw_state_exists(blocks: &[String], goal: &[String], fact: &str) -> bool {
    let idx = |s: &str| blocks.iter().position(|b| b == s).unwrap_or_else(|| panic!("{s}"));
    let parse = |f: &str| -> (String, Vec<usize>) {
        let inner = f.trim_start_matches('(').trim_end_matches(')');
        let mut it = inner.split_whitespace();
        let p = it.next().unwrap().to_string();
        (p, it.map(idx).collect())
    };
    let goal: Vec<(String, Vec<usize>)> = goal.iter().map(|f| parse(f)).collect();
    let fact = parse(fact);
    let n = blocks.len();
    let mut options: Vec<Vec<Support>> = (0..n)
        .map(|x| {
            let mut o = vec![Support::Table, Support::Held];
            o.extend((0..n).filter(|&y| y != x).map(Support::On));
            o
        })
        .collect();
    for (p, a) in &goal {
        match p.as_str() {
            "on" => options[a[0]] = vec![Support::On(a[1])],
            "on-table" => options[a[0]] = vec![Support::Table],
            "holding" => options[a[0]] = vec![Support::Held],
            _ => {}
        }
    }
    let holds = |(p, a): &(String, Vec<usize>), s: &[Support]| -> bool {
        match p.as_str() {
            "on" => s[a[0]] == Support::On(a[1]),
            "on-table" => s[a[0]] == Support::Table,
            "holding" => s[a[0]] == Support::Held,
            "clear" => s[a[0]] != Support::Held && !s.contains(&Support::On(a[0])),
            "arm-empty" => !s.contains(&Support::Held),
            other => panic!("{other}"),
        }
    };
    fn rec(i: usize, s: &mut Vec<Support>, options: &[Vec<Support>], leaf: &mut dyn FnMut(&[Support]) -> bool) -> bool {
        if i == s.len() {
            return leaf(s);
        }
        for &o in &options[i] {
            let ok = match o {
                Support::Held => !s[..i].contains(&Support::Held),
                Support::On(y) => !s[..i].contains(&o) && (y >= i || s[y] != Support::Held),
                Support::Table => true,
            };
            if ok {
                s[i] = o;
                if rec(i + 1, s, options, leaf) {
                    return true;
                }
            }
        }
        false
    }
    let mut leaf = |s: &[Support]| -> bool {
        // Nothing on a held block, and no cycles: every chain of supports ends on the table
        // or in the hand.
        if (0..n).any(|x| s[x] == Support::Held && s.contains(&Support::On(x))) {
            return false;
        }
        for x in 0..n {
            let mut cur = x;
            for _ in 0..=n {
                match s[cur] {
                    Support::On(y) => cur = y,
                    _ => break,
                }
            }
            if let Support::On(_) = s[cur] {
                return false;
            }
        }
        goal.iter().all(|g| holds(g, s)) && !holds(&fact, s)
    };
    rec(0, &mut vec![Support::Table; n], &options, &mut leaf)
}

/// Planetarium BlocksWorld rows of `size` blocks stacked in exactly two towers (the
/// "tower" rows put one block beside a tower of the rest, the "equal_towers" rows split them
/// evenly), one per shape, at most `n`, as (domain, problem).
fn two_tower_rows(data: &std::path::PathBuf, size: u64, n: usize) -> Vec<(String, String)> {
    let rows = common::planetarium(data, "blocksworld", usize::MAX, |v| {
        v["num_objects"] == size
            && v["name"].as_str().is_some_and(|s| s.starts_with("blocksworld_tower_to_") || s.starts_with("blocksworld_equal_towers_to_"))
    });
    let mut shapes = Vec::new();
    let mut out = Vec::new();
    for (d, p) in rows {
        let mut heights: Vec<usize> = towers_of(&p).iter().map(|t| t.len()).collect();
        heights.sort();
        if heights.len() == 2 && !shapes.contains(&heights) {
            shapes.push(heights);
            out.push((d, p));
            if out.len() == n {
                break;
            }
        }
    }
    out
}

/// One constructed pair: the reference task, the candidate with two goal facts dropped, a
/// plan that solves both, and which facts were dropped.
struct Dropped {
    name: String,
    reference: Spec,
    candidate: Spec,
    plan: Vec<String>,
    blocks: Vec<String>,
    goal: Vec<String>,
    dropped: [String; 2],
}

/// The swap and invert tasks of a row, each with every pair of goal facts dropped (every
/// `stride`-th pair, in order).
fn dropped_pairs(domain: &str, problem: &str, stride: usize) -> Vec<Dropped> {
    let init = towers_of(problem);
    let blocks: Vec<String> = parse_problem(problem).unwrap().objects.iter().map(|o| o.name.clone()).collect();
    let mut out = Vec::new();
    for (kind, goal_towers) in [("swap", swap(&init)), ("invert", invert(&init))] {
        let goal = goal_of(&goal_towers);
        let reference = Spec { domain: domain.to_string(), problem: with_goal(problem, &goal) };
        let plan = bw_plan(&init, &goal_towers);
        assert!(common::plan_valid(&reference, &plan), "the constructed plan solves the {kind} task");
        let mut k = 0;
        for i in 0..goal.len() {
            for j in i + 1..goal.len() {
                k += 1;
                if k % stride != 0 {
                    continue;
                }
                let kept: Vec<String> = goal.iter().enumerate().filter(|(x, _)| *x != i && *x != j).map(|(_, f)| f.clone()).collect();
                out.push(Dropped {
                    name: format!("{} blocks, {kind}, without {} {}", blocks.len(), goal[i], goal[j]),
                    reference: reference.clone(),
                    candidate: Spec { domain: domain.to_string(), problem: with_goal(problem, &kept) },
                    plan: plan.clone(),
                    blocks: blocks.clone(),
                    goal: kept,
                    dropped: [goal[i].clone(), goal[j].clone()],
                });
            }
        }
    }
    out
}

/// The oracle's verdict: the candidate means the task iff both dropped facts are implied.
fn truly_equivalent(d: &Dropped) -> bool {
    d.dropped.iter().all(|f| !bw_state_exists(&d.blocks, &d.goal, f))
}

/// Closure mode: too few states enumerated for the exact decision.
fn closure_limits() -> Limits {
    Limits { max_states: 500, ..Limits::default() }
}

fn run(d: &Dropped, limits: &Limits) -> FaithfulnessReport {
    check(&d.reference, &d.candidate, Some(&d.plan), true, limits).unwrap()
}

#[test]
fn oracle_sees_the_two_towers_counterexample() {
    // Two towers a-b and c-d (bottom first): without (on-table a) and (clear d), a may sit on d.
    let blocks: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
    let goal = goal_of(&vec![vec!["a".into(), "b".into()], vec!["c".into(), "d".into()]]);
    let kept: Vec<String> = goal.iter().filter(|f| *f != "(on-table a)" && *f != "(clear d)").cloned().collect();
    assert!(bw_state_exists(&blocks, &kept, "(on-table a)"));
    // Within one tower the same two facts are implied: a on d would close a cycle.
    let one = goal_of(&vec![vec!["a".into(), "b".into(), "c".into(), "d".into()]]);
    let kept: Vec<String> = one.iter().filter(|f| *f != "(on-table a)" && *f != "(clear d)").cloned().collect();
    assert!(!bw_state_exists(&blocks, &kept, "(on-table a)"));
    assert!(!bw_state_exists(&blocks, &kept, "(clear d)"));
}

#[test]
fn dropping_one_towers_bottom_and_the_others_top_is_not_faithful() {
    let Some(data) = common::data_dir() else { return };
    for size in [11, 12] {
        let (d, p) = two_tower_rows(&data, size, 1).into_iter().next().expect("a two-tower row");
        let init = towers_of(&p);
        for (kind, goal_towers) in [("swap", swap(&init)), ("invert", invert(&init))] {
            let goal = goal_of(&goal_towers);
            let reference = Spec { domain: d.clone(), problem: with_goal(&p, &goal) };
            let plan = bw_plan(&init, &goal_towers);
            // One tower's bottom block and the other tower's top block: the first tower may
            // now stand on the second.
            for (a, b) in [(0, 1), (1, 0)] {
                let bottom = format!("(on-table {})", goal_towers[a][0]);
                let top = format!("(clear {})", goal_towers[b].last().unwrap());
                let kept: Vec<String> = goal.iter().filter(|f| **f != bottom && **f != top).cloned().collect();
                assert_eq!(kept.len(), goal.len() - 2);
                let candidate = Spec { domain: d.clone(), problem: with_goal(&p, &kept) };
                for limits in [Limits::default(), closure_limits()] {
                    let r = check(&reference, &candidate, Some(&plan), true, &limits).unwrap();
                    let what = format!("{size} blocks, {kind}, without {bottom} {top}");
                    assert!(!r.faithful && !r.goal_preserved, "{what}: {r:#?}");
                    assert_eq!(r.decision, Decision::Closure, "{what}: {r:#?}");
                    assert!(r.explanation.iter().any(|l| l.contains(&bottom) && l.contains("not implied")), "{what}: {r:#?}");
                }
            }
        }
    }
}

#[test]
fn closure_verdicts_agree_with_an_oracle_on_10_to_12_blocks() {
    let Some(data) = common::data_dir() else { return };
    let limits = closure_limits();
    let (mut n, mut undecided, mut closure_faithful, mut wrong) = (0, 0, 0, Vec::new());
    for size in [10, 11, 12] {
        for (d, p) in two_tower_rows(&data, size, 2) {
            for c in dropped_pairs(&d, &p, 3) {
                let r = run(&c, &limits);
                let truth = truly_equivalent(&c);
                n += 1;
                match r.decision {
                    Decision::Undecided => undecided += 1,
                    _ if r.faithful != truth => wrong.push(format!("{}: checker {} oracle {}\n{r:#?}", c.name, r.faithful, truth)),
                    Decision::Closure if r.faithful => closure_faithful += 1,
                    _ => {}
                }
            }
        }
    }
    println!("{n} pairs, {closure_faithful} faithful by closure, {undecided} undecided");
    assert!(wrong.is_empty(), "{} of {n} wrong:\n{}", wrong.len(), wrong.join("\n"));
    assert!(n >= 150, "{n} pairs");
    // Both kinds occur: equivalent pairs (implied facts dropped) proved, others refuted.
    assert!(closure_faithful >= 10, "{closure_faithful} faithful by closure");
    assert!(undecided * 20 <= n, "{undecided} of {n} undecided");
}

#[test]
fn closure_verdicts_agree_with_the_exact_search_where_it_finishes() {
    let Some(data) = common::data_dir() else { return };
    let forced = Limits { max_states: 1, ..Limits::default() };
    let (mut n, mut undecided, mut wrong) = (0, 0, Vec::new());
    for size in [5, 6] {
        for (d, p) in two_tower_rows(&data, size, 2) {
            for c in dropped_pairs(&d, &p, 1) {
                let exact = run(&c, &Limits::default());
                assert_eq!(exact.decision, Decision::Exact, "{}", c.name);
                assert_eq!(exact.faithful, truly_equivalent(&c), "{}: the exact search and the oracle disagree", c.name);
                let closure = run(&c, &forced);
                n += 1;
                if closure.decision == Decision::Undecided {
                    undecided += 1;
                } else if closure.faithful != exact.faithful {
                    wrong.push(format!("{}: closure {} exact {}\n{closure:#?}", c.name, closure.faithful, exact.faithful));
                }
            }
        }
    }
    println!("{n} pairs, {undecided} undecided in closure mode");
    assert!(wrong.is_empty(), "{} of {n} wrong:\n{}", wrong.len(), wrong.join("\n"));
    assert!(n >= 100, "{n} pairs");
    assert!(undecided * 20 <= n, "{undecided} of {n} undecided");
}

// ---- Keep what is right: Gripper --------------------------------------------------------

/// A Planetarium Gripper row with one room and three balls in it, as (domain, problem).
fn gripper_one_room(data: &std::path::PathBuf) -> (String, String) {
    let rows = common::planetarium(data, "gripper", 1, |v| {
        v["init"] == "one_room" && v["num_objects"] == 6 && v["problem_pddl"].as_str().is_some_and(|p| p.contains("(ball ball3)") && !p.contains("room2"))
    });
    rows.into_iter().next().expect("a one-room row with three balls")
}

#[test]
fn static_facts_added_to_a_gripper_goal_stay_faithful() {
    let Some(data) = common::data_dir() else { return };
    let rows = common::planetarium(&data, "gripper", 1, |v| {
        v["init"] == "n_room_distributed" && v["goal"] == "n_room_distributed" && v["num_objects"] == 9 && v["goal_is_abstract"] == 0
    });
    let (d, p) = &rows[0];
    let pr = parse_problem(p).unwrap();
    let of = |kind: &str| pr.init.iter().rev().find(|a| a.predicate == kind).map(|a| a.args[0].name.clone()).unwrap();
    let statics = format!("(ball {}) (room {}) (gripper {})", of("ball"), of("room"), of("gripper"));
    let reference = Spec { domain: d.clone(), problem: p.clone() };
    let candidate = Spec { domain: d.clone(), problem: p.replacen("(:goal (and", &format!("(:goal (and {statics}"), 1) };
    assert_ne!(candidate.problem, *p);
    let plan = common::plan_for(&reference);
    for limits in [Limits::default(), Limits { max_states: 1, ..Limits::default() }] {
        let r = check(&reference, &candidate, Some(&plan), true, &limits).unwrap();
        assert!(r.faithful, "{statics}: {r:#?}");
    }
}

#[test]
fn a_balls_room_implied_by_busy_grippers_stays_faithful() {
    let Some(data) = common::data_dir() else { return };
    let (d, p) = gripper_one_room(&data);
    // Both grippers busy with two balls: the third can only be in the one room.
    let busy = ["(carry ball1 gripper1)".to_string(), "(carry ball2 gripper2)".to_string()];
    let mut full = busy.to_vec();
    full.push("(at ball3 room1)".into());
    let reference = Spec { domain: d.clone(), problem: with_goal(&p, &full) };
    let candidate = Spec { domain: d.clone(), problem: with_goal(&p, &busy) };
    let plan = common::plan_for(&reference);
    for limits in [Limits::default(), Limits { max_states: 1, ..Limits::default() }] {
        // Either way round: the fact left out, or the fact added.
        for (a, b) in [(&reference, &candidate), (&candidate, &reference)] {
            let r = check(a, b, Some(&plan), true, &limits).unwrap();
            assert!(r.faithful, "{r:#?}");
        }
    }
    // With one gripper busy the third ball may be in the other: not implied, not faithful.
    let one = Spec { domain: d.clone(), problem: with_goal(&p, &busy[..1]) };
    let half = Spec { domain: d.clone(), problem: with_goal(&p, &[busy[0].clone(), full[2].clone()]) };
    for limits in [Limits::default(), Limits { max_states: 1, ..Limits::default() }] {
        let r = check(&half, &one, Some(&common::plan_for(&half)), true, &limits).unwrap();
        assert!(!r.faithful && !r.goal_preserved, "{r:#?}");
    }
}

// ---- Problem mode: the domain's names mean themselves (floor-tile) ----------------------

fn floor_tile(data: &std::path::Path) -> String {
    std::fs::read_to_string(data.join("planetarium/domains/floor-tile.pddl")).unwrap()
}

/// A Planetarium-style floor-tile problem.
fn tile_problem(name: &str, tiles: usize, init: &[String], goal: &[&str]) -> String {
    let tiles: Vec<String> = (1..=tiles).map(|i| format!("tile{i}")).collect();
    format!(
        "(define (problem {name})\n    (:domain floor-tile)\n    (:requirements :typing)\n    (:objects {} - tile robot1 - robot black white - color)\n    (:init {} (available-color black) (available-color white) (robot-has robot1 white))\n    (:goal (and {}))\n)",
        tiles.join(" "),
        init.join(" "),
        goal.join(" ")
    )
}

/// The grid of `rows` × `cols` tiles, numbered row by row from the top left: `(up x y)` when
/// x is just above y, `(right x y)` when x is just right of y.
fn grid(rows: usize, cols: usize) -> Vec<String> {
    let t = |r: usize, c: usize| format!("tile{}", r * cols + c + 1);
    let mut f = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            if r + 1 < rows {
                f.push(format!("(up {} {})", t(r, c), t(r + 1, c)));
            }
            if c + 1 < cols {
                f.push(format!("(right {} {})", t(r, c + 1), t(r, c)));
            }
        }
    }
    f
}

/// `(up x y)` written as `(right y x)` and `(right x y)` as `(up y x)`: the grid mirrored
/// through its anti-diagonal, a symmetry of the domain's structure, not of its meaning.
fn up_right_swapped(facts: &[String]) -> Vec<String> {
    facts
        .iter()
        .map(|f| {
            let w: Vec<&str> = f.trim_matches(|c| c == '(' || c == ')').split_whitespace().collect();
            match w[0] {
                "up" => format!("(right {} {})", w[2], w[1]),
                "right" => format!("(up {} {})", w[2], w[1]),
                _ => f.clone(),
            }
        })
        .collect()
}

fn tile_case(domain: &str, reference: &str, candidate: &str) -> (Spec, Spec, Vec<String>) {
    let r = Spec { domain: domain.to_string(), problem: reference.to_string() };
    let c = Spec { domain: domain.to_string(), problem: candidate.to_string() };
    let plan = common::plan_for(&c);
    (r, c, plan)
}

#[test]
fn a_column_rewritten_as_a_row_is_not_faithful_in_problem_mode() {
    let Some(data) = common::data_dir() else { return };
    let d = floor_tile(&data);
    // The failing case: (up tile1 tile2) … (up tile5 tile6) as (right tile2 tile1) … .
    let column: Vec<String> = (1..6).map(|i| format!("(up tile{i} tile{})", i + 1)).collect();
    let row = up_right_swapped(&column);
    assert_eq!(row[0], "(right tile2 tile1)");
    let start = "(robot-at robot1 tile6)".to_string();
    let goal = ["(painted tile1 black)", "(painted tile3 white)"];
    let reference = tile_problem("column", 6, &[column.clone(), vec![start.clone()]].concat(), &goal);
    let candidate = tile_problem("column", 6, &[row, vec![start]].concat(), &goal);
    let (r, c, plan) = tile_case(&d, &reference, &candidate);
    let rep = check(&r, &c, Some(&plan), true, &Limits::default()).unwrap();
    assert!(!rep.faithful && !rep.goal_preserved, "{rep:#?}");
    assert!(rep.objects_preserved && rep.schema_consistent, "same objects and the same domain: {rep:#?}");
    assert!(rep.explanation.iter().any(|l| l.contains("initial state differs")), "{rep:#?}");
    // The same domain without its comments, on one line, in upper case, is still the
    // reference's own.
    let copy: String = d.lines().map(|l| l.split(';').next().unwrap()).collect::<Vec<_>>().join(" ").to_uppercase();
    assert_ne!(copy, d);
    let rep = check(&r, &Spec { domain: copy, ..c.clone() }, Some(&plan), true, &Limits::default()).unwrap();
    assert!(!rep.faithful && !rep.goal_preserved, "{rep:#?}");
    // The whole 2 × 3 grid mirrored: a 3 × 2 grid, another task.
    let g = grid(2, 3);
    let start = "(robot-at robot1 tile1)".to_string();
    let goal = ["(painted tile3 black)", "(painted tile4 black)"];
    let reference = tile_problem("grid", 6, &[g.clone(), vec![start.clone()]].concat(), &goal);
    let candidate = tile_problem("grid", 6, &[up_right_swapped(&g), vec![start]].concat(), &goal);
    let (r, c, plan) = tile_case(&d, &reference, &candidate);
    let rep = check(&r, &c, Some(&plan), true, &Limits::default()).unwrap();
    assert!(!rep.faithful, "{rep:#?}");
    // The same task, its tiles renamed, stays faithful.
    let m: HashMap<String, String> = (1..=6).map(|i| (format!("tile{i}"), format!("t{}", 7 - i))).collect();
    let (r, c, plan) = tile_case(&d, &reference, &common::rename(&reference, &m));
    let rep = check(&r, &c, Some(&plan), true, &Limits::default()).unwrap();
    assert!(rep.faithful, "{rep:#?}");
    assert!(rep.explanation.is_empty(), "{rep:#?}");
}

#[test]
fn a_robot_moved_on_a_symmetric_grid_is_not_faithful_in_problem_mode() {
    let Some(data) = common::data_dir() else { return };
    let d = floor_tile(&data);
    // 3 × 3, centre to be painted: turning the grid half round maps tile1 onto tile9.
    let g = grid(3, 3);
    let goal = ["(painted tile5 black)"];
    let reference = tile_problem("grid", 9, &[g.clone(), vec!["(robot-at robot1 tile1)".into()]].concat(), &goal);
    for moved in ["tile9", "tile3", "tile7"] {
        let candidate = tile_problem("grid", 9, &[g.clone(), vec![format!("(robot-at robot1 {moved})")]].concat(), &goal);
        let (r, c, plan) = tile_case(&d, &reference, &candidate);
        let rep = check(&r, &c, Some(&plan), true, &Limits::default()).unwrap();
        assert!(!rep.faithful && !rep.goal_preserved, "robot at {moved}: {rep:#?}");
        assert!(rep.explanation.iter().any(|l| l.contains("initial state differs")), "{rep:#?}");
    }
}

#[test]
fn a_generated_domain_keeps_the_name_free_mapping_and_reports_the_symmetry() {
    let Some(data) = common::data_dir() else { return };
    let d = floor_tile(&data);
    // The same predicates and actions, written in another order: not the reference's text.
    let at = d.find("(:action up").unwrap();
    let end = d.rfind(')').unwrap();
    let generated = format!("{}{}{})", &d[..d.find("(:action change-color").unwrap()], &d[at..end], &d[d.find("(:action change-color").unwrap()..at]);
    assert_ne!(generated, d);
    onebrain_pddl::parse_domain(&generated).unwrap();
    let column: Vec<String> = (1..6).map(|i| format!("(up tile{i} tile{})", i + 1)).collect();
    let start = "(robot-at robot1 tile6)".to_string();
    let goal = ["(painted tile1 black)", "(painted tile3 white)"];
    let reference = tile_problem("column", 6, &[column.clone(), vec![start.clone()]].concat(), &goal);
    let candidate = tile_problem("column", 6, &[up_right_swapped(&column), vec![start]].concat(), &goal);
    let r = Spec { domain: d.clone(), problem: reference };
    let c = Spec { domain: generated.clone(), problem: candidate };
    let plan = common::plan_for(&c);
    let rep = check(&r, &c, Some(&plan), true, &Limits::default()).unwrap();
    assert!(rep.faithful, "{rep:#?}");
    assert!(rep.explanation.iter().any(|l| l.contains("non-identity symmetry of the reference domain") && l.contains("`right` ↦ `up`")), "{rep:#?}");
    // The same generated domain with the reference's own problem: the names agree, no note.
    let c = Spec { domain: generated, problem: r.problem.clone() };
    let plan = common::plan_for(&c);
    let rep = check(&r, &c, Some(&plan), true, &Limits::default()).unwrap();
    assert!(rep.faithful && rep.explanation.is_empty(), "{rep:#?}");
}
