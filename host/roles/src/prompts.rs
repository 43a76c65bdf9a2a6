//! The prompts of every role and strategy.
//!
//! Every prompt of a task starts with the same bytes: the system prompt, the domain's
//! description (and, in `problem` mode, its PDDL), then the task text. Only what follows
//! differs: the Actor's instruction, the Judge's candidate, the Editor's candidate and
//! diagnostics. A model with a prefix KV cache (`onebrain_model::Brain` keeps one per role)
//! therefore computes the long shared head once per task and role, and each repair only pays
//! for its own tail. The head depends on the domain before the task, so tasks of one domain
//! share the domain part too.

use onebrain_core::{Diagnostic, Spec, Verdict};
use sha2::{Digest, Sha256};

use crate::extract::Mode;

/// The system message of every prompt.
pub const SYSTEM: &str = "You are an expert in classical planning. You translate planning tasks written in natural language into PDDL that the Fast Downward planner can solve, keeping every object, initial fact and goal of the task.";

/// How many diagnostics an Editor prompt lists (errors first); the rest are counted.
const MAX_DIAGNOSTICS: usize = 8;
/// The raw planner output shown to a Self-Refine repair is cut to this many characters.
const MAX_RAW_CHARS: usize = 1200;

/// The part of every prompt that depends only on the task: built once per task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskContext {
    /// The domain's natural-language description (from the domain plugin).
    pub description: String,
    /// The domain PDDL given to the model in `problem` mode.
    pub domain_pddl: Option<String>,
    /// The task text x.
    pub task: String,
    /// Full or problem mode.
    pub mode: Mode,
    /// A worked example (task text, problem PDDL) shown before the task, when the config
    /// asks for one (`example`).
    pub example: Option<(String, String)>,
}

/// The formats every prompt ends in: a ChatML turn, as `onebrain_model::chat_prompt` builds.
fn chat(system: &str, user: &str, primer: &str) -> String {
    format!("{}{primer}", onebrain_model::chat_prompt(system, user))
}

/// The name in a domain's `(define (domain NAME)`, if it has one.
fn domain_name(domain_pddl: &str) -> Option<&str> {
    let lower = domain_pddl.to_ascii_lowercase();
    let at = lower.find("(domain")? + "(domain".len();
    let rest = domain_pddl[at..].trim_start();
    let end = rest.find(|c: char| c.is_whitespace() || c == ')')?;
    (end > 0).then(|| &rest[..end])
}

impl TaskContext {
    /// The text the assistant turn is primed with, so the answer starts inside a code block.
    /// In `problem` mode it also opens the problem's skeleton (name, the given domain's name,
    /// `:objects`): a small model shown a domain otherwise tends to copy the domain back.
    pub fn primer(&self) -> String {
        match (self.mode, self.domain_pddl.as_deref().and_then(domain_name)) {
            (Mode::Full, _) => "```pddl\n(define (domain ".into(),
            (Mode::Problem, Some(name)) => {
                format!("```pddl\n(define (problem task)\n  (:domain {name})\n  (:objects ")
            }
            (Mode::Problem, None) => "```pddl\n(define (problem ".into(),
        }
    }

    /// The shared head of the user message: domain, then task.
    fn head(&self) -> String {
        let mut s = String::with_capacity(self.description.len() + self.task.len() + 256);
        s.push_str("## Domain\n");
        s.push_str(self.description.trim());
        s.push('\n');
        if let (Mode::Problem, Some(d)) = (self.mode, &self.domain_pddl) {
            s.push_str("\n## Domain PDDL\n```pddl\n");
            s.push_str(d.trim());
            s.push_str("\n```\n");
        }
        if let Some((text, problem)) = &self.example {
            s.push_str("\n## Example\nTask: ");
            s.push_str(text.trim());
            s.push_str("\nProblem PDDL:\n```pddl\n");
            s.push_str(problem.trim());
            s.push_str("\n```\n");
        }
        s.push_str("\n## Task\n");
        s.push_str(self.task.trim());
        s.push('\n');
        s
    }

    fn what(&self) -> &'static str {
        match self.mode {
            Mode::Full => "the PDDL domain and problem",
            Mode::Problem => "the PDDL problem",
        }
    }

    fn answer_format(&self) -> &'static str {
        match self.mode {
            Mode::Full => "Answer with two ```pddl code blocks: first the domain `(define (domain ...))`, then the problem `(define (problem ...))`.",
            Mode::Problem => "Use the domain PDDL above exactly: the same domain name, predicates and actions. Answer with one ```pddl code block holding `(define (problem ...))`.",
        }
    }

    /// The Actor's prompt π(y | x, A).
    pub fn actor(&self) -> String {
        let user = format!(
            "{}\n## Instruction\nWrite {} for this task. Declare every object, state every initial fact and every goal fact of the task. {}",
            self.head(),
            self.what(),
            self.answer_format()
        );
        chat(SYSTEM, &user, &self.primer())
    }

    /// The Judge's prompt for s_J(x, y): the task and a candidate (see [`TaskContext::candidate_text`]).
    pub fn judge(&self, candidate: &str) -> String {
        let user = format!(
            "{}\n## Candidate\n{}\n## Instruction\nDoes the candidate encode exactly this task (same objects, initial state and goal) so that a planner can solve it? Answer yes or no.",
            self.head(),
            candidate.trim()
        );
        chat(SYSTEM, &user, "")
    }

    /// The Editor's prompt π(· | x, y_t, d_t, E): the candidate and the structured diagnostics.
    pub fn editor(&self, candidate: &str, verdict: &Verdict) -> String {
        let user = format!(
            "{}\n## Candidate\n{}\n## Verifier diagnostics\n{}\n## Instruction\nRepair the candidate so that it parses, a planner solves it, and it still states exactly this task. Fix the problems the diagnostics name and keep everything else. {}",
            self.head(),
            candidate.trim(),
            format_diagnostics(verdict),
            self.answer_format()
        );
        chat(SYSTEM, &user, &self.primer())
    }

    /// Self-Refine's repair prompt: the raw verifier messages, no role conditioning, no
    /// categories.
    pub fn self_refine(&self, candidate: &str, verdict: &Verdict) -> String {
        let user = format!(
            "{}\n## Your previous answer\n{}\n## Feedback\n{}\n## Instruction\nImprove your answer using the feedback. {}",
            self.head(),
            candidate.trim(),
            raw_feedback(verdict),
            self.answer_format()
        );
        chat(SYSTEM, &user, &self.primer())
    }

    /// LLM+P's prompt: one worked example of the domain (its text and problem PDDL) in context.
    pub fn llm_plus_p(&self, example_text: &str, example_problem: &str) -> String {
        let user = format!(
            "{}\n## Example\nTask: {}\nProblem PDDL:\n```pddl\n{}\n```\n\n## Instruction\nWrite {} for the task above, as in the example. {}",
            self.head(),
            example_text.trim(),
            example_problem.trim(),
            self.what(),
            self.answer_format()
        );
        chat(SYSTEM, &user, &self.primer())
    }

    /// The direct (CoT) prompt: the model writes the plan itself.
    pub fn direct(&self) -> String {
        let user = format!(
            "{}\n## Instruction\nThink step by step about the actions needed, then write the plan: one action per line in the form `(action-name arg1 arg2)`, using the action names of the domain and the objects' names from the task, inside a ```plan code block.",
            self.head()
        );
        chat(SYSTEM, &user, "")
    }

    /// Tree-of-Thought's proposal prompt: the plan so far, asking for the next action.
    pub fn tot_propose(&self, partial: &[String]) -> String {
        let user = format!(
            "{}\n## Plan so far\n{}\n## Instruction\nWrite the next action as `(action-name arg1 arg2)`, or `(done)` if the goal is reached.",
            self.head(),
            plan_lines(partial)
        );
        chat(SYSTEM, &user, "(")
    }

    /// Tree-of-Thought's value prompt: how promising a partial plan is (scored by the Judge head).
    pub fn tot_value(&self, partial: &[String]) -> String {
        let user = format!(
            "{}\n## Plan so far\n{}\n## Instruction\nIs this plan prefix valid and on the way to the goal? Answer yes or no.",
            self.head(),
            plan_lines(partial)
        );
        chat(SYSTEM, &user, "")
    }

    fn candidate_blocks(&self, spec: &Spec) -> String {
        match self.mode {
            Mode::Full => format!(
                "```pddl\n{}\n```\n```pddl\n{}\n```\n",
                spec.domain.trim(),
                spec.problem.trim()
            ),
            Mode::Problem => format!("```pddl\n{}\n```\n", spec.problem.trim()),
        }
    }

    /// The candidate as the Editor sees it: what the model wrote in this mode.
    pub fn candidate_text(&self, spec: Option<&Spec>, raw_output: &str) -> String {
        match spec {
            Some(s) => self.candidate_blocks(s),
            // No PDDL at all: show the model what it wrote instead.
            None => format!("```\n{}\n```\n", raw_output.trim()),
        }
    }
}

fn plan_lines(partial: &[String]) -> String {
    if partial.is_empty() {
        "(empty)".into()
    } else {
        partial.join("\n")
    }
}

/// Structured diagnostics, one per line: `- [category] domain line 3, column 5: message`.
pub fn format_diagnostics(verdict: &Verdict) -> String {
    let mut lines = vec![format!("outcome: {}", outcome_name(verdict))];
    let mut diags: Vec<&Diagnostic> = verdict.diagnostics.iter().collect();
    diags.sort_by_key(|d| !d.is_error());
    for d in diags.iter().take(MAX_DIAGNOSTICS) {
        let mut s = format!("- [{}] ", d.category);
        if let Some(f) = d.file {
            s.push_str(&format!("{f} "));
        }
        if let (Some(l), Some(c)) = (d.line, d.column) {
            s.push_str(&format!("line {l}, column {c}"));
        }
        s.push_str(": ");
        s.push_str(d.message.trim());
        lines.push(s);
    }
    if diags.len() > MAX_DIAGNOSTICS {
        lines.push(format!("- ... and {} more", diags.len() - MAX_DIAGNOSTICS));
    }
    lines.join("\n")
}

/// What Self-Refine feeds back: the messages as plain text, and the planner's own output.
pub fn raw_feedback(verdict: &Verdict) -> String {
    let mut s: String = verdict
        .diagnostics
        .iter()
        .map(|d| format!("{}\n", d.message.trim()))
        .collect();
    if let Some(out) = &verdict.solver_output {
        let raw = format!("{}{}", out.stdout, out.stderr);
        let tail: String = raw
            .chars()
            .rev()
            .take(MAX_RAW_CHARS)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        s.push_str(&tail);
    }
    if s.trim().is_empty() {
        s = "The planner found no plan.".into();
    }
    s
}

fn outcome_name(v: &Verdict) -> &'static str {
    use onebrain_core::Outcome::*;
    match v.outcome {
        Solved => "solved",
        Rejected => "rejected by the checks (the planner was not called)",
        Unsolvable => "the planner proved the task unsolvable",
        Timeout => "the planner timed out",
        OutOfMemory => "the planner ran out of memory",
        InputError => "the planner rejected the input",
        SolverError => "the planner failed",
    }
}

/// The hex sha256 of a prompt, as recorded in traces.
pub fn prompt_hash(prompt: &str) -> String {
    hex::encode(Sha256::digest(prompt.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_core::{Category, Outcome};

    fn ctx(mode: Mode) -> TaskContext {
        TaskContext {
            description: "Blocks on a table.".into(),
            domain_pddl: Some("(define (domain bw))".into()),
            task: "Put a on b.".into(),
            mode,
            example: None,
        }
    }

    fn verdict() -> Verdict {
        let mut d = Diagnostic::error(Category::Syntax, "unexpected `)`");
        d.file = Some(onebrain_core::SpecFile::Problem);
        d.line = Some(3);
        d.column = Some(7);
        Verdict {
            solved: false,
            outcome: Outcome::Rejected,
            plan: vec![],
            diagnostics: vec![Diagnostic::warning(Category::Unreachable, "unused"), d],
            time_ms: 1,
            solver_time_ms: 0,
            solver_output: None,
        }
    }

    #[test]
    fn roles_share_the_task_prefix() {
        for mode in [Mode::Full, Mode::Problem] {
            let c = ctx(mode);
            let spec = Spec {
                domain: "(define (domain bw))".into(),
                problem: "(define (problem p))".into(),
            };
            let prompts = [
                c.actor(),
                c.judge(&c.candidate_text(Some(&spec), "")),
                c.editor("(define (problem p))", &verdict()),
                c.self_refine("x", &verdict()),
                c.direct(),
            ];
            let head = onebrain_model::chat_prompt(SYSTEM, &c.head());
            let head = &head[..head.find("<|im_end|>\n<|im_start|>assistant").unwrap()];
            for p in &prompts {
                assert!(p.starts_with(head), "{p}");
            }
            assert_eq!(c.head().contains("## Domain PDDL"), mode == Mode::Problem);
        }
    }

    #[test]
    fn diagnostics_are_listed_errors_first_with_positions() {
        let text = format_diagnostics(&verdict());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "outcome: rejected by the checks (the planner was not called)"
        );
        assert_eq!(
            lines[1],
            "- [syntax] problem line 3, column 7: unexpected `)`"
        );
        assert_eq!(lines[2], "- [unreachable] : unused");
        assert!(raw_feedback(&verdict()).starts_with("unused\nunexpected"));
    }

    #[test]
    fn problem_primer_opens_the_skeleton() {
        assert_eq!(
            ctx(Mode::Problem).primer(),
            "```pddl\n(define (problem task)\n  (:domain bw)\n  (:objects "
        );
        assert_eq!(ctx(Mode::Full).primer(), "```pddl\n(define (domain ");
        assert!(ctx(Mode::Problem).actor().ends_with("(:objects "));
        assert_eq!(
            domain_name("(define\n (DOMAIN blocksworld-4ops)\n"),
            Some("blocksworld-4ops")
        );
        assert_eq!(domain_name("(define (problem p)"), None);
    }

    #[test]
    fn hashes_are_stable_hex() {
        assert_eq!(
            prompt_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn in_context_example_sits_between_the_domain_and_the_task_of_every_role() {
        let with = TaskContext {
            example: Some(("Put b on a.".into(), "(define (problem ex))".into())),
            ..ctx(Mode::Problem)
        };
        for prompt in [
            with.actor(),
            with.editor("(x)", &verdict()),
            with.judge("(x)"),
        ] {
            let (domain, example, task) = (
                prompt.find("## Domain PDDL").unwrap(),
                prompt.find("## Example").unwrap(),
                prompt.find("## Task").unwrap(),
            );
            assert!(domain < example && example < task, "{prompt}");
            assert!(
                prompt.contains(
                    "Task: Put b on a.\nProblem PDDL:\n```pddl\n(define (problem ex))\n```"
                ),
                "{prompt}"
            );
        }
        assert!(!ctx(Mode::Problem).actor().contains("## Example"));
    }
}
