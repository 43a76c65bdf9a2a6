//! Plans written by the model (the `direct` and `tot` strategies): reading them, mapping the
//! task's object names to the reference problem's, and validating them natively.
//!
//! PlanBench states tasks with names other than its PDDL objects: BlocksWorld's `a`, `b`, …
//! are "the red block", "the blue block", … (its `encoded_objects`), Mystery BlocksWorld
//! says "object a", Logistics says `package_0` for `p0` and `location_1_0` for `l1-0`. A model
//! that plans in the task's words is mapped back by these conventions; names that already are
//! PDDL objects pass through.

use std::time::Instant;

use onebrain_core::{Category, Diagnostic, Outcome, Spec, Verdict};

/// PlanBench's BlocksWorld colours, for objects `a`, `b`, … in order.
const COLOURS: [&str; 12] = [
    "red", "blue", "orange", "yellow", "white", "magenta", "black", "cyan", "green", "violet",
    "silver", "gold",
];
/// Filler words that name no object.
const FILLER: [&str; 5] = ["the", "block", "object", "from", "on"];

/// The `(action args…)` lines of a model's answer: those inside a ```plan (or any) code block
/// when there is one, else anywhere. `(done)` and empty forms are dropped.
pub fn parse_plan_lines(text: &str) -> Vec<String> {
    let body = fenced(text).unwrap_or(text);
    body.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.trim_start_matches(|c: char| {
                c.is_ascii_digit() || c == '.' || c == '-' || c == '*' || c == ' '
            });
            let open = l.find('(')?;
            let close = open + l[open..].find(')')?;
            let inner = l[open + 1..close].trim().to_ascii_lowercase();
            let words: Vec<&str> = inner
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|w| !w.is_empty())
                .collect();
            match words.first() {
                None | Some(&"done") => None,
                Some(_) => Some(format!("({})", words.join(" "))),
            }
        })
        .collect()
}

/// The body of the last code block, if the text has one.
fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let after = &text[start + 3..];
    let body_start = after.find('\n').map_or(0, |i| i + 1);
    let body = &after[body_start..];
    Some(body.find("```").map_or(body, |end| &body[..end]))
}

/// Maps one argument written in the task's words to a reference object, if it names one.
fn map_object(word: &str, objects: &[String]) -> String {
    let w = word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '-');
    if objects.iter().any(|o| o == w) {
        return w.to_string();
    }
    let stripped = w
        .trim_end_matches("_block")
        .trim_start_matches("object_")
        .trim_start_matches("the_");
    if objects.iter().any(|o| o == stripped) {
        return stripped.to_string();
    }
    if let Some(i) = COLOURS.iter().position(|c| *c == stripped) {
        let letter = ((b'a' + i as u8) as char).to_string();
        if objects.contains(&letter) {
            return letter;
        }
    }
    // Logistics: package_0 → p0, truck_1 → t1, airplane_0 → a0, city_2 → c2, location_1_0 → l1-0.
    let parts: Vec<&str> = stripped.split('_').collect();
    let short = match parts.as_slice() {
        [kind, n] => kind.chars().next().map(|c| format!("{c}{n}")),
        [kind, a, b] => kind.chars().next().map(|c| format!("{c}{a}-{b}")),
        _ => None,
    };
    if let Some(s) = short.filter(|s| objects.contains(s)) {
        return s;
    }
    stripped.to_string()
}

/// Rewrites each step's arguments into the reference objects' names; words that name no
/// object ("the", "block") are dropped.
pub fn map_plan(plan: &[String], objects: &[String]) -> Vec<String> {
    plan.iter()
        .map(|step| {
            let inner = step.trim_start_matches('(').trim_end_matches(')');
            let mut words = inner.split_whitespace();
            let action = words.next().unwrap_or_default().to_string();
            let args: Vec<String> = words
                .filter(|w| !FILLER.contains(w))
                .map(|w| map_object(w, objects))
                .collect();
            if args.is_empty() {
                format!("({action})")
            } else {
                format!("({action} {})", args.join(" "))
            }
        })
        .collect()
}

/// Validates a plan answer: its steps ([`parse_plan_lines`]) against the reference task. A
/// code block with no step in it is an empty plan, validated like any other (right exactly
/// when the goal already holds); an answer with neither a block nor a step holds no plan.
pub fn validate_answer(reference: &Spec, text: &str) -> (Vec<String>, Verdict) {
    let plan = parse_plan_lines(text);
    let stated_empty = plan.is_empty() && fenced(text).is_some();
    (plan.clone(), check_plan(reference, &plan, stated_empty))
}

/// Validates `plan` against the reference task natively; the verdict of a plan strategy.
/// An empty `plan` holds no plan step.
pub fn validate_plan(reference: &Spec, plan: &[String]) -> Verdict {
    check_plan(reference, plan, false)
}

fn check_plan(reference: &Spec, plan: &[String], empty_is_a_plan: bool) -> Verdict {
    let start = Instant::now();
    let fail = |category, message: String| (false, vec![Diagnostic::error(category, message)]);
    let (solved, diagnostics, steps) = match (
        onebrain_pddl::parse_domain(&reference.domain),
        onebrain_pddl::parse_problem(&reference.problem),
    ) {
        (Ok(domain), Ok(problem)) => {
            let objects: Vec<String> = problem.objects.iter().map(|o| o.name.to_string()).collect();
            let mapped = map_plan(plan, &objects);
            let (solved, diags) = if mapped.is_empty() && !empty_is_a_plan {
                fail(
                    Category::Syntax,
                    "the answer holds no plan step `(action args)`".into(),
                )
            } else {
                match onebrain_pddl::parse_plan(&mapped.join("\n")) {
                    Err(e) => fail(Category::Syntax, format!("the plan does not parse: {e}")),
                    Ok(p) => {
                        let r = onebrain_pddl::validate(&domain, &problem, &p);
                        if r.valid {
                            (true, Vec::new())
                        } else {
                            let category = if r.failed_step.is_some() {
                                Category::PreconditionEffect
                            } else {
                                Category::GoalConstraint
                            };
                            let mut msg = r.reason.clone();
                            if !r.unsatisfied.is_empty() {
                                msg.push_str(&format!(
                                    " (unsatisfied: {})",
                                    r.unsatisfied.join(" ")
                                ));
                            }
                            fail(category, msg)
                        }
                    }
                }
            };
            (solved, diags, mapped)
        }
        (Err(e), _) | (_, Err(e)) => {
            let (s, d) = fail(
                Category::SolverError,
                format!("the reference task does not parse: {e}"),
            );
            (s, d, plan.to_vec())
        }
    };
    Verdict {
        solved,
        outcome: if solved {
            Outcome::Solved
        } else {
            Outcome::Rejected
        },
        plan: steps,
        diagnostics,
        time_ms: start.elapsed().as_millis() as u64,
        solver_time_ms: 0,
        solver_output: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BW_DOMAIN: &str = "(define (domain bw) (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
      (:action pick-up :parameters (?ob) :precondition (and (clear ?ob) (ontable ?ob) (handempty))
        :effect (and (holding ?ob) (not (clear ?ob)) (not (ontable ?ob)) (not (handempty))))
      (:action stack :parameters (?ob ?underob) :precondition (and (clear ?underob) (holding ?ob))
        :effect (and (handempty) (clear ?ob) (on ?ob ?underob) (not (clear ?underob)) (not (holding ?ob)))))";
    const BW_PROBLEM: &str = "(define (problem p) (:domain bw) (:objects a b)
      (:init (clear a) (clear b) (ontable a) (ontable b) (handempty)) (:goal (on a b)))";

    #[test]
    fn plan_lines_from_prose_and_fences() {
        let text = "First I pick up red.\n```plan\n1. (pick-up red)\n2. (stack red, blue)\n(done)\n```\nThat's it (really).";
        assert_eq!(
            parse_plan_lines(text),
            ["(pick-up red)", "(stack red blue)"]
        );
        assert_eq!(
            parse_plan_lines("(PICK-UP A)\nno plan here\n()"),
            ["(pick-up a)"]
        );
        assert!(parse_plan_lines("").is_empty());
    }

    #[test]
    fn task_names_map_to_reference_objects() {
        let bw: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        assert_eq!(
            map_plan(&["(stack the red block blue_block)".into()], &bw),
            ["(stack a b)"]
        );
        let lg: Vec<String> = ["p0", "a1", "l1-0", "c0"].map(String::from).to_vec();
        assert_eq!(
            map_plan(
                &["(load-airplane package_0 airplane_1 location_1_0)".into()],
                &lg
            ),
            ["(load-airplane p0 a1 l1-0)"]
        );
        assert_eq!(
            map_plan(&["(feast object_a b)".into()], &bw),
            ["(feast a b)"]
        );
        assert_eq!(
            map_plan(&["(move ball1 room9)".into()], &bw),
            ["(move ball1 room9)"]
        );
    }

    /// Regression: under the plan grammar the base model answered BlocksWorld with prose and
    /// an empty ```plan block, which was counted as a syntax failure. An empty block is an
    /// empty plan: right when the goal already holds, a goal failure when it does not.
    #[test]
    fn an_empty_plan_block_is_an_empty_plan() {
        let unsolved = Spec { domain: BW_DOMAIN.into(), problem: BW_PROBLEM.into() };
        let (plan, v) = validate_answer(&unsolved, "Here is the plan:\n```plan\n```");
        assert!(plan.is_empty() && !v.solved);
        assert_eq!(v.dominant_category(), Some(Category::GoalConstraint), "{v:?}");
        let trivial = Spec { problem: BW_PROBLEM.replace("(:goal (on a b))", "(:goal (clear a))"), ..unsolved.clone() };
        assert!(validate_answer(&trivial, "```plan\n```").1.solved);
        // No block and no step: no plan at all.
        let (_, v) = validate_answer(&trivial, "I would move the blocks.");
        assert_eq!(v.dominant_category(), Some(Category::Syntax));
        // Steps are validated as before.
        assert!(validate_answer(&unsolved, "```plan\n(pick-up a)\n(stack a b)\n```").1.solved);
    }

    #[test]
    fn validation_verdicts() {
        let reference = Spec {
            domain: BW_DOMAIN.into(),
            problem: BW_PROBLEM.into(),
        };
        let v = validate_plan(
            &reference,
            &["(pick-up red)".into(), "(stack red blue)".into()],
        );
        assert!(v.solved, "{v:?}");
        assert_eq!(v.plan, ["(pick-up a)", "(stack a b)"]);
        let v = validate_plan(&reference, &["(stack red blue)".into()]);
        assert_eq!(v.dominant_category(), Some(Category::PreconditionEffect));
        let v = validate_plan(&reference, &["(pick-up red)".into()]);
        assert_eq!(v.dominant_category(), Some(Category::GoalConstraint));
        let v = validate_plan(&reference, &[]);
        assert_eq!(v.dominant_category(), Some(Category::Syntax));
        let broken = Spec {
            domain: "(define".into(),
            problem: BW_PROBLEM.into(),
        };
        assert_eq!(
            validate_plan(&broken, &["(pick-up a)".into()]).dominant_category(),
            Some(Category::SolverError)
        );
    }
}
