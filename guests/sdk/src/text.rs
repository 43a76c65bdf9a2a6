//! Natural-language statements of problems, in the benchmarks' own words.

use crate::pddl::{self, Atom};
use crate::Result;

/// `a, b and c` (PlanBench's list style); `a` alone; empty for none.
pub fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Fills `{}` placeholders of `template` with `args` in order.
pub fn fill(template: &str, args: &[String]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    let mut args = args.iter();
    while let Some(i) = rest.find("{}") {
        out.push_str(&rest[..i]);
        out.push_str(args.next().map_or("", String::as_str));
        rest = &rest[i + 2..];
    }
    out.push_str(rest);
    out
}

/// How a PlanBench domain words its facts: one template per predicate
/// (`("on", "the {} is on top of the {}")`) and a namer for objects.
/// Predicates without a template (Logistics' type predicates) are not said,
/// exactly as in PlanBench's statements.
pub struct PlanBenchWording<'a> {
    /// Predicate name to template, with `{}` for each argument.
    pub predicates: &'a [(&'a str, &'a str)],
    /// Object name (as in the PDDL) to its words, e.g. `a` → `red block`.
    pub object: &'a dyn Fn(&str) -> String,
}

impl PlanBenchWording<'_> {
    fn say(&self, atom: &Atom) -> Option<String> {
        let (_, template) = self.predicates.iter().find(|(p, _)| p.eq_ignore_ascii_case(&atom.predicate))?;
        let args: Vec<String> = atom.args.iter().map(|t| (self.object)(&t.name)).collect();
        Some(fill(template, &args))
    }

    fn say_all<'b>(&self, atoms: impl Iterator<Item = &'b Atom>) -> Vec<String> {
        // PlanBench sorts facts by "predicate arg1 arg2 …" before wording them.
        let mut atoms: Vec<(String, &Atom)> = atoms
            .map(|a| {
                let key = std::iter::once(a.predicate.as_str())
                    .chain(a.args.iter().map(|t| t.name.as_str()))
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_ascii_lowercase();
                (if a.args.is_empty() { key + " " } else { key }, a)
            })
            .collect();
        atoms.sort_by(|x, y| x.0.cmp(&y.0));
        atoms.into_iter().filter_map(|(_, a)| self.say(a)).collect()
    }

    /// PlanBench's statement of a problem: "As initial conditions I have
    /// that, … .\nMy goal is to have that … ."
    pub fn statement(&self, problem_pddl: &str) -> Result<String> {
        let p = pddl::parse_problem(problem_pddl).map_err(|e| e.to_string())?;
        if let Some(l) = p.goal.iter().find(|l| !l.positive) {
            return Err(format!("negative goal {l} cannot be stated in this domain's words"));
        }
        let init = self.say_all(p.init.iter());
        let goal = self.say_all(p.goal.iter().map(|l| &l.atom));
        if goal.is_empty() {
            return Err("the problem has no goal this domain can state".into());
        }
        Ok(format!(
            "As initial conditions I have that, {}.\nMy goal is to have that {}.",
            join_and(&init),
            join_and(&goal)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_and_fills() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(join_and(&s(&["a", "b", "c"])), "a, b and c");
        assert_eq!(join_and(&s(&["a"])), "a");
        assert_eq!(fill("the {} is on top of the {}", &s(&["x", "y"])), "the x is on top of the y");
    }
}
