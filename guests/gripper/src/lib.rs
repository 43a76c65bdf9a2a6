//! IPC Gripper (one robby, untyped), worded as Planetarium words its
//! explicit tasks. `size` = balls (1-20); two grippers, 2-3 rooms.

use onebrain_sdk::pddl::{self, Atom};
use onebrain_sdk::{DomainAdapter, Result, Rng, Spec, Task};

const DOMAIN: &str = include_str!("../domain.pddl");
const DESCRIPTION: &str = include_str!("../description.txt");

/// `ball12` → 12: Planetarium orders facts by the objects' numbers.
fn num(name: &str) -> u64 {
    name.trim_start_matches(|c: char| !c.is_ascii_digit()).parse().unwrap_or(u64::MAX)
}

fn arg(a: &Atom, i: usize) -> &str {
    a.args.get(i).map_or("?", |t| t.name.as_str())
}

/// Planetarium's explicit wording: counts, then each gripper (free or
/// carrying), then balls by room; the goal in the problem's order.
fn describe(problem_pddl: &str) -> Result<String> {
    let p = pddl::parse_problem(problem_pddl).map_err(|e| e.to_string())?;
    let count = |pred: &str| p.init.iter().filter(|a| a.predicate == pred).count();
    let mut out = format!("You have {} rooms.\nYou have {} balls.\nYou have {} grippers.\n", count("room"), count("ball"), count("gripper"));
    let mut grippers: Vec<(u64, String)> = Vec::new();
    let mut balls: Vec<(u64, u64, String)> = Vec::new();
    for a in &p.init {
        match a.predicate.as_str() {
            "free" => grippers.push((num(arg(a, 0)), format!("{} is free.\n", arg(a, 0)))),
            "carry" => grippers.push((num(arg(a, 1)), format!("Gripper {} is carrying {}.\n", arg(a, 1), arg(a, 0)))),
            "at" => balls.push((num(arg(a, 1)), num(arg(a, 0)), format!("{} is at {}.\n", arg(a, 0), arg(a, 1)))),
            _ => {}
        }
    }
    grippers.sort();
    balls.sort();
    grippers.into_iter().for_each(|g| out += &g.1);
    balls.into_iter().for_each(|b| out += &b.2);
    out += "Your goal is to have the following:";
    for l in &p.goal {
        let a = &l.atom;
        out += &match (l.positive, a.predicate.as_str()) {
            (true, "free") => format!("\n{} should be free.", arg(a, 0)),
            (true, "carry") => format!("\nGripper {} should be carrying {}.", arg(a, 1), arg(a, 0)),
            (true, "at") => format!("\n{} should be at {}.", arg(a, 0), arg(a, 1)),
            _ => return Err(format!("goal {l} cannot be stated in Planetarium's gripper wording")),
        };
    }
    Ok(out)
}

/// Balls at random rooms, robby in room 1, both grippers free; the goal
/// puts every ball in a room, at least one of them a different one.
fn problem(seed: u64, size: u32) -> Result<String> {
    if !(1..=20).contains(&size) {
        return Err(format!("size must be 1 to 20 balls, not {size}"));
    }
    let mut r = Rng::new(seed);
    let rooms = 2 + r.below(2) as u32;
    let from: Vec<u32> = (0..size).map(|_| 1 + r.below(rooms as usize) as u32).collect();
    let mut to: Vec<u32> = (0..size).map(|_| 1 + r.below(rooms as usize) as u32).collect();
    if to == from {
        to[0] = from[0] % rooms + 1;
    }
    let objs: Vec<String> = (1..=size).map(|b| format!("ball{b}")).chain(["gripper1".into(), "gripper2".into()]).chain((1..=rooms).map(|r| format!("room{r}"))).collect();
    let mut init: Vec<String> = (0..size as usize).map(|b| format!("(at ball{} room{})", b + 1, from[b])).collect();
    init.push("(at-robby room1)".into());
    init.extend((1..=size).map(|b| format!("(ball ball{b})")));
    init.extend(["(free gripper1)".into(), "(free gripper2)".into(), "(gripper gripper1)".into(), "(gripper gripper2)".into()]);
    init.extend((1..=rooms).map(|r| format!("(room room{r})")));
    let goal: Vec<String> = (0..size as usize).map(|b| format!("(at ball{} room{})", b + 1, to[b])).collect();
    Ok(format!("(define (problem gripper_seed_{seed}_{size})\n    (:domain gripper)\n    (:requirements :strips)\n    (:objects {})\n    (:init {})\n    (:goal (and {}))\n)", objs.join(" "), init.join(" "), goal.join(" ")))
}

#[derive(Default)]
pub struct Gripper;

impl DomainAdapter for Gripper {
    fn name(&self) -> String {
        "gripper".into()
    }
    fn description(&self) -> Result<String> {
        Ok(DESCRIPTION.into())
    }
    fn domain_pddl(&self) -> Result<String> {
        Ok(DOMAIN.into())
    }
    fn generate(&self, seed: u64, size: u32) -> Result<Task> {
        let problem = problem(seed, size)?;
        let text = describe(&problem)?;
        let reference = Some(Spec { domain: DOMAIN.into(), problem });
        Ok(Task { id: format!("gripper/seed-{seed}-size-{size}"), domain: self.name(), text, reference })
    }
    fn describe(&self, problem_pddl: &str) -> Result<String> {
        describe(problem_pddl)
    }
}

onebrain_sdk::export_domain_adapter!(Gripper);
