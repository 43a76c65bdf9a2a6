//! PlanBench Logistics (`logistics-strips`, untyped with type predicates),
//! worded as PlanBench words it (`l1-0` is `location_1_0`). `size` = packages (1-20).

use onebrain_sdk::text::PlanBenchWording;
use onebrain_sdk::{DomainAdapter, Result, Rng, Spec, Task};

const DOMAIN: &str = include_str!("../domain.pddl");
const DESCRIPTION: &str = include_str!("../description.txt");
/// PlanBench's templates; its type predicates (OBJ, TRUCK, …) have none and go unsaid.
const PREDICATES: &[(&str, &str)] =
    &[("airport", "{} is an airport"), ("at", "{} is at {}"), ("in", "{} is in {}"), ("in-city", "{} is in the city {}")];

/// PlanBench's `encoded_objects`: the letter picks the kind, the numbers follow.
fn object(name: &str) -> String {
    let kind = match name.as_bytes().first() {
        Some(b'p') => "package",
        Some(b't') => "truck",
        Some(b'a') => "airplane",
        Some(b'l') => "location",
        Some(b'c') => "city",
        _ => return name.into(),
    };
    let rest = &name[1..];
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return name.into();
    }
    format!("{kind}_{}", rest.replace('-', "_"))
}

/// `cities` cities of 1-2 locations (the first one an airport), a truck
/// each, 1-2 airplanes, and `size` packages that must move.
fn problem(seed: u64, size: u32) -> Result<String> {
    if !(1..=20).contains(&size) {
        return Err(format!("size must be 1 to 20 packages, not {size}"));
    }
    let mut r = Rng::new(seed);
    let (cities, per_city, planes) = (2 + r.below(2), 1 + r.below(2), 1 + r.below(2));
    let loc = |c: usize, i: usize| format!("l{c}-{i}");
    let any_loc = |r: &mut Rng| loc(r.below(cities), r.below(per_city));
    let (mut objects, mut init) = (String::new(), String::new());
    for a in 0..planes {
        objects += &format!("a{a} ");
        init += &format!("    (AIRPLANE a{a})\n    (at a{a} {})\n", loc(r.below(cities), 0));
    }
    for c in 0..cities {
        objects += &format!("c{c} t{c} ");
        init += &format!("    (CITY c{c})\n    (TRUCK t{c})\n    (AIRPORT {})\n    (at t{c} {})\n", loc(c, 0), loc(c, r.below(per_city)));
        for i in 0..per_city {
            objects += &format!("{} ", loc(c, i));
            init += &format!("    (LOCATION {0})\n    (in-city {0} c{c})\n", loc(c, i));
        }
    }
    let mut goal = String::new();
    for p in 0..size {
        let (from, mut to) = (any_loc(&mut r), any_loc(&mut r));
        while to == from && cities * per_city > 1 {
            to = any_loc(&mut r);
        }
        objects += &format!("p{p} ");
        init += &format!("    (OBJ p{p})\n    (at p{p} {from})\n");
        goal += &format!("        (at p{p} {to})\n");
    }
    Ok(format!("(define (problem logistics-c{cities}-s{per_city}-p{size}-a{planes})\n(:domain logistics-strips)\n(:objects {objects}\n)\n(:init\n{init})\n(:goal\n    (and\n{goal}    )\n)\n)\n"))
}

#[derive(Default)]
pub struct Logistics;

impl DomainAdapter for Logistics {
    fn name(&self) -> String {
        "logistics".into()
    }
    fn description(&self) -> Result<String> {
        Ok(DESCRIPTION.into())
    }
    fn domain_pddl(&self) -> Result<String> {
        Ok(DOMAIN.into())
    }
    fn generate(&self, seed: u64, size: u32) -> Result<Task> {
        let problem = problem(seed, size)?;
        let text = self.describe(&problem)?;
        let reference = Some(Spec { domain: DOMAIN.into(), problem });
        Ok(Task { id: format!("logistics/seed-{seed}-size-{size}"), domain: self.name(), text, reference })
    }
    fn describe(&self, problem_pddl: &str) -> Result<String> {
        PlanBenchWording { predicates: PREDICATES, object: &object }.statement(problem_pddl)
    }
}

onebrain_sdk::export_domain_adapter!(Logistics);
