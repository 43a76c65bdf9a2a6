//! The spec strategies' steps: generating y_t (the Actor's, or the Editor's repair of the
//! step before), its verdict and Judge score, and what comes after a verdict.

use onebrain_core::Verdict;
use onebrain_model::{ConstraintSpec, Generation, MutexGroup, MutexPart, Role, SamplingConfig, StopReason};

use super::{Episode, Phase, Request};
use crate::extract::{extract_spec, Mode};
use crate::guard_verdict::honesty_gave_way_verdict;
use crate::plan::validate_answer;
use crate::prompts::prompt_hash;
use crate::record::{Event, StepRecord, StepTimings};
use crate::strategy::{Constrain, RepeatPolicy, Strategy, MAX_RESAMPLES};

impl Episode {
    pub(super) fn generate(&mut self, index: u32) -> Request {
        let (role, prompt, max_tokens, resample) = match (self.cfg.strategy, index) {
            (Strategy::MultiRole, 0) | (Strategy::SelfRefine, 0) => {
                (Role::Actor, self.ctx.actor(), self.cfg.max_tokens, false)
            }
            (Strategy::MultiRole, _) | (Strategy::SelfRefine, _) => {
                let last = self
                    .last_spec_step()
                    .expect("a repair follows a verified step");
                let candidate = self.ctx.candidate_text(last.spec.as_ref(), &last.output);
                let verdict = last.verdict.as_ref().expect("verified");
                if self.cfg.strategy == Strategy::MultiRole {
                    (
                        Role::Editor,
                        self.ctx.editor(&candidate, verdict),
                        self.cfg.max_tokens,
                        false,
                    )
                } else {
                    // Self-Refine has no role conditioning: the Actor's parameters throughout.
                    (
                        Role::Actor,
                        self.ctx.self_refine(&candidate, verdict),
                        self.cfg.max_tokens,
                        false,
                    )
                }
            }
            (Strategy::LlmPlusP, _) => {
                let (text, problem) = self.input.example.as_ref().expect("checked at start");
                (
                    Role::Actor,
                    self.ctx.llm_plus_p(text, problem),
                    self.cfg.max_tokens,
                    true,
                )
            }
            (Strategy::Direct, _) => (
                Role::Actor,
                self.ctx.direct(),
                self.cfg.plan_max_tokens,
                true,
            ),
            // The Actor's own prompt each time: greedy first at evaluation, then samples.
            (Strategy::BestOfK, _) => (Role::Actor, self.ctx.actor(), self.cfg.max_tokens, true),
            (Strategy::BestThenRepair, i) if i < self.cfg.samples => {
                (Role::Actor, self.ctx.actor(), self.cfg.max_tokens, true)
            }
            (Strategy::BestThenRepair, _) => {
                let at = self.repair_of.expect("a repair follows the pick");
                let step = &self.record.steps[at];
                let candidate = self.ctx.candidate_text(step.spec.as_ref(), &step.output);
                let verdict = self.repair_verdict(at);
                (Role::Editor, self.ctx.editor(&candidate, &verdict), self.cfg.max_tokens, false)
            }
            (Strategy::Tot, _) => unreachable!("ToT proposes through `propose`"),
        };
        let mut sampling = self.cfg.sampling(index, max_tokens, resample);
        if self.cfg.mode == Mode::Problem && !self.cfg.strategy.writes_plan() {
            // The primer opened the one code block: its closing fence ends the answer, and
            // the prose a small model adds after it would cost seconds per step.
            sampling.stop = vec!["```".into()];
        }
        sampling.constraint = self.constraint(index);
        self.ask(Phase::Generating { index }, role, prompt, sampling)
    }

    /// The grammar generation `index` is held to, when `constrain = "grammar"`.
    pub(super) fn constraint(&self, index: u32) -> Option<ConstraintSpec> {
        if self.cfg.constrain == Constrain::None {
            return None;
        }
        let limits = self.cfg.grammar;
        let domain = self.input.domain_pddl.clone();
        match self.cfg.strategy {
            Strategy::Direct | Strategy::Tot => {
                let objects = self.reference_objects()?;
                let domain = domain?;
                Some(if self.cfg.strategy == Strategy::Direct {
                    ConstraintSpec::Plan { domain, objects, limits }
                } else {
                    ConstraintSpec::NextAction { domain, objects }
                })
            }
            _ => match self.cfg.mode {
                Mode::Full => Some(ConstraintSpec::Full {
                    limits,
                    avoid: self.candidates_to_avoid(index),
                    forbid_goal_at_init: self.cfg.forbid_goal_at_init,
                }),
                Mode::Problem => {
                    let domain = domain?;
                    let init_mutex = if self.cfg.forbid_init_mutex { init_mutex(&domain) } else { Vec::new() };
                    Some(ConstraintSpec::Problem {
                        domain,
                        prefix: self.ctx.primer(),
                        limits,
                        avoid: self.candidates_to_avoid(index),
                        forbid_goal_at_init: self.cfg.forbid_goal_at_init,
                        init_mutex,
                    })
                }
            },
        }
    }

    /// The reference task's objects with their types: the vocabulary of a plan grammar.
    fn reference_objects(&self) -> Option<Vec<(String, String)>> {
        let r = self.input.task.reference.as_ref()?;
        let p = onebrain_pddl::parse_problem(&r.problem).ok()?;
        Some(p.objects.iter().map(|o| (o.name.to_ascii_lowercase(), o.ty.to_ascii_lowercase())).collect())
    }

    /// True when generation `index` repairs an earlier candidate (an Editor or Self-Refine step).
    fn is_repair(&self, index: u32) -> bool {
        match self.cfg.strategy {
            Strategy::MultiRole | Strategy::SelfRefine => index > 0,
            Strategy::BestThenRepair => index >= self.cfg.samples,
            _ => false,
        }
    }

    /// What the Editor is told about step `at`: its verdict, and when the planner solved it
    /// but Φ found it worthless, why a solved spec still needs repair.
    fn repair_verdict(&self, at: usize) -> Verdict {
        let step = &self.record.steps[at];
        let mut verdict = step.verdict.clone().expect("a verified step");
        if verdict.solved {
            let why = if verdict.plan.is_empty() {
                "the planner's plan is empty: the goal already holds in the stated initial state, so the spec does not ask for what the task asks"
            } else {
                "the planner solved it, but the spec does not state the task's text: a fact or goal the text does not say, or one it contradicts"
            };
            verdict.diagnostics.insert(0, onebrain_core::Diagnostic::error(onebrain_core::Category::GoalConstraint, why));
        }
        verdict
    }

    /// The earlier candidates a repair may not repeat (`editor-repeats = "forbid"`).
    fn candidates_to_avoid(&self, index: u32) -> Vec<String> {
        if !self.is_repair(index) || self.cfg.editor_repeats != RepeatPolicy::Forbid {
            return Vec::new();
        }
        let mut earlier: Vec<String> = Vec::new();
        for s in self.record.steps.iter().filter(|s| s.verdict.is_some()) {
            if !earlier.contains(&s.output) {
                earlier.push(s.output.clone());
            }
        }
        earlier
    }

    /// True when `text` (a spec answer, primer included) says what an earlier candidate of this
    /// episode said, up to whitespace and case.
    fn repeats_earlier(&self, text: &str) -> bool {
        let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ").to_ascii_lowercase();
        let now = norm(text);
        let primer = self.ctx.primer();
        self.record
            .steps
            .iter()
            .filter(|s| s.verdict.is_some())
            .any(|s| norm(&format!("{primer}{}", s.output)) == now)
    }

    pub(super) fn ask(
        &mut self,
        phase: Phase,
        role: Role,
        prompt: String,
        sampling: SamplingConfig,
    ) -> Request {
        self.phase = phase;
        self.pending = Some((role, prompt.clone(), sampling.clone()));
        Request::Generate {
            role,
            prompt,
            sampling,
        }
    }

    fn last_spec_step(&self) -> Option<&StepRecord> {
        self.record.steps.iter().rev().find(|s| s.verdict.is_some())
    }

    pub(super) fn kind(&self, index: u32) -> &'static str {
        match (self.cfg.strategy, index) {
            (Strategy::MultiRole, 0) | (Strategy::SelfRefine, 0) => "actor",
            (Strategy::MultiRole, _) => "editor",
            (Strategy::SelfRefine, _) => "self-refine",
            (Strategy::LlmPlusP, _) | (Strategy::BestOfK, _) => "sample",
            (Strategy::BestThenRepair, i) if i < self.cfg.samples => "sample",
            (Strategy::BestThenRepair, _) => "editor",
            (Strategy::Direct, _) => "plan",
            (Strategy::Tot, _) => "propose",
        }
    }

    pub(super) fn step_from(
        &self,
        index: u32,
        kind: &str,
        role: Role,
        prompt: String,
        g: &Generation,
        sampling: SamplingConfig,
    ) -> StepRecord {
        StepRecord {
            index,
            role,
            kind: kind.to_string(),
            prompt_sha256: prompt_hash(&prompt),
            prompt,
            prompt_tokens: g.prompt_tokens,
            cached_prompt_tokens: g.cached_prompt_tokens,
            output: g.text.clone(),
            output_tokens: g.tokens.clone(),
            output_logprobs: g.logprobs.clone(),
            sampling,
            stop_reason: stop_name(&g.stop_reason),
            constraint: g.constraint.clone(),
            extraction: None,
            spec: None,
            verdict: None,
            dominant: None,
            solver_call: false,
            judge_score: None,
            judge_prompt: None,
            timings: StepTimings {
                prefill_ms: g.prefill_secs * 1e3,
                decode_ms: g.decode_secs * 1e3,
                ..Default::default()
            },
        }
    }

    pub(super) fn on_generated(&mut self, index: u32, g: Generation) -> Request {
        let (role, prompt, sampling) = self.pending.take().expect("a generation was asked for");
        let kind = self.kind(index);
        if self.is_repair(index) && self.repeats_earlier(&format!("{}{}", self.ctx.primer(), g.text)) {
            if self.cfg.editor_repeats != RepeatPolicy::Keep && self.resamples < MAX_RESAMPLES {
                // Thrown away: its time counts, it spends no budget. Each retry samples hotter.
                self.resamples += 1;
                self.record.timings.generation_ms += (g.prefill_secs + g.decode_secs) * 1e3;
                self.record.discarded_repeats += 1;
                let t = self.cfg.temperature * (1.0 + 0.25 * (self.resamples - 1) as f32);
                let seed = self.cfg.seed.wrapping_add(1000 * u64::from(index) + u64::from(self.resamples));
                let resampled = SamplingConfig {
                    temperature: t,
                    top_p: self.cfg.top_p,
                    seed,
                    ..sampling
                };
                return self.ask(Phase::Generating { index }, role, prompt, resampled);
            }
            self.record.repeated_repairs += 1;
        }
        self.resamples = 0;
        if self.is_repair(index) {
            self.record.repairs += 1;
        }
        let mut step = self.step_from(index, kind, role, prompt, &g, sampling);
        self.record.timings.generation_ms += step.timings.prefill_ms + step.timings.decode_ms;
        let primed = match self.cfg.strategy {
            Strategy::Direct => String::new(),
            _ => self.ctx.primer(),
        };
        let text = format!("{primed}{}", g.text);
        self.events.push(Event::Generated {
            task_id: self.record.task_id.clone(),
            index,
            role,
            kind: kind.to_string(),
            text: text.clone(),
            tokens: g.tokens.len(),
            secs: g.prefill_secs + g.decode_secs,
        });
        if self.cfg.strategy == Strategy::Direct {
            let reference = self
                .input
                .task
                .reference
                .as_ref()
                .expect("checked at start");
            let (_, verdict) = validate_answer(reference, &text);
            step.solver_call = true;
            self.record.steps.push(step);
            let at = self.record.steps.len() - 1;
            return self.on_verified(at, verdict);
        }
        let ex = extract_spec(&text, self.cfg.mode, self.input.domain_pddl.as_deref());
        step.spec = ex.spec.clone();
        // No PDDL is a syntax failure; an answer an honesty guard gave way in is unsolved
        // by that alone. Either spends its budget unit without a planner call.
        let failure = ex
            .failure_verdict()
            .or_else(|| g.constraint.as_ref().and_then(honesty_gave_way_verdict));
        step.extraction = Some(ex);
        self.record.steps.push(step);
        let at = self.record.steps.len() - 1;
        match failure {
            // Judged without the planner: spends its budget unit all the same.
            Some(v) => self.on_verified(at, v),
            None => {
                self.phase = Phase::Verifying { step: at };
                Request::Verify {
                    spec: self.record.steps[at].spec.clone().expect("extracted"),
                }
            }
        }
    }

    pub(super) fn on_verified(&mut self, at: usize, verdict: Verdict) -> Request {
        // A no-PDDL output, or one an honesty guard gave way in, spends its budget unit
        // without reaching the verifier.
        let step = &self.record.steps[at];
        let real_call = step.extraction.as_ref().is_none_or(|e| e.failure.is_none())
            && step.constraint.as_ref().is_none_or(|c| c.honesty_gave_way().is_none());
        let writes_plan = self.cfg.strategy.writes_plan();
        let rec = &mut self.record;
        rec.solver_calls += 1;
        if real_call {
            rec.planner_calls += u32::from(verdict.solver_time_ms > 0 || writes_plan);
        }
        rec.timings.verification_ms += verdict.time_ms as f64;
        rec.timings.planner_ms += verdict.solver_time_ms as f64;
        let step = &mut rec.steps[at];
        step.solver_call = real_call;
        step.timings.verify_ms = verdict.time_ms as f64;
        step.dominant = if verdict.solved {
            None
        } else {
            verdict.dominant_category()
        };
        let index = step.index;
        self.events.push(Event::Verified {
            task_id: rec.task_id.clone(),
            index,
            verdict: verdict.clone(),
        });
        // Store the verdict without the planner's full log: it can run to 64 KiB per call.
        let mut stored = verdict;
        stored.solver_output = stored.solver_output.map(|mut o| {
            o.stdout = tail(&o.stdout, 2000);
            o.stderr = tail(&o.stderr, 2000);
            o
        });
        let solved = stored.solved;
        rec.steps[at].verdict = Some(stored);
        let attempt = rec.steps.iter().filter(|s| s.verdict.is_some()).count();
        if attempt == 1 {
            rec.b0 = solved;
        }
        // Multi-role judges y_0; best-of-k judges every sample, since its selector may read it.
        let judged = match self.cfg.strategy {
            Strategy::MultiRole => attempt == 1,
            Strategy::BestOfK => true,
            Strategy::BestThenRepair => index < self.cfg.samples,
            _ => false,
        };
        if self.cfg.judge && judged {
            let step = &self.record.steps[at];
            let candidate = self.ctx.candidate_text(step.spec.as_ref(), &step.output);
            let prompt = self.ctx.judge(&candidate);
            self.record.steps[at].judge_prompt = Some(prompt.clone());
            self.phase = Phase::Judging { step: at };
            return Request::Judge { prompt };
        }
        self.after_verdict(at)
    }

    pub(super) fn on_judged(&mut self, at: usize, score: f32, secs: f64) -> Request {
        let rec = &mut self.record;
        rec.timings.judge_ms += secs * 1e3;
        // The record's s_J is y_0's (the Judge's AUC pairs it with b_0); each step keeps its own.
        if rec.judge_score.is_none() {
            rec.judge_score = Some(score);
        }
        let step = &mut rec.steps[at];
        step.judge_score = Some(score);
        step.timings.judge_ms += secs * 1e3;
        self.events.push(Event::Judged {
            task_id: rec.task_id.clone(),
            index: rec.steps[at].index,
            score,
        });
        self.after_verdict(at)
    }

    fn after_verdict(&mut self, at: usize) -> Request {
        let step = &self.record.steps[at];
        let solved = step.verdict.as_ref().is_some_and(|v| v.solved);
        let index = step.index;
        if solved && self.record.first_success.is_none() {
            self.record.first_success = Some(index);
        }
        if self.cfg.strategy == Strategy::BestThenRepair {
            return self.best_then_repair_next(index);
        }
        // Best-of-k spends its whole budget: a later sample may be the better answer.
        if solved && self.cfg.strategy != Strategy::BestOfK {
            return self.done();
        }
        if self.record.solver_calls >= self.cfg.budget {
            return self.done();
        }
        match self.cfg.strategy {
            Strategy::MultiRole | Strategy::SelfRefine => {
                // Step t is the t-th repair's output.
                if index >= self.cfg.repairs_allowed() {
                    return self.done();
                }
                self.generate(index + 1)
            }
            Strategy::LlmPlusP | Strategy::Direct | Strategy::BestOfK => self.generate(index + 1),
            Strategy::BestThenRepair => unreachable!("handled above"),
            Strategy::Tot => self.tot_next(),
        }
    }
}

fn stop_name(r: &StopReason) -> String {
    match r {
        StopReason::Eos => "eos".into(),
        StopReason::StopString(s) => format!("stop:{s}"),
        StopReason::MaxTokens => "max-tokens".into(),
        StopReason::ContextFull => "context-full".into(),
        StopReason::Complete => "complete".into(),
    }
}

fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        s.to_string()
    } else {
        s.chars().skip(count - n).collect()
    }
}

/// The domain's mutex groups, proved from its action schemas, as the guard reads them
/// (`forbid-init-mutex`); none when the domain does not parse (the verifier will say why).
fn init_mutex(domain: &str) -> Vec<MutexGroup> {
    let Ok(d) = onebrain_pddl::parse_domain(domain) else { return Vec::new() };
    let part = |p: onebrain_faithful::GroupPart| MutexPart { predicate: p.predicate, params: p.params, counted: p.counted };
    onebrain_faithful::mutex_groups(&d).into_iter().map(|g| MutexGroup { parts: g.parts.into_iter().map(part).collect() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plugin's BlocksWorld gets its groups, and the guard built from them refuses an
    /// initial state the domain cannot be in, byte by byte as a decoder would meet it.
    #[test]
    fn blocksworld_groups_reach_the_guard() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guests/blocksworld/domain.pddl");
        let domain = std::fs::read_to_string(path).unwrap();
        let groups = init_mutex(&domain);
        assert_eq!(groups.len(), 3, "{groups:?}");
        assert!(init_mutex("(define (domain broken").is_empty());
        let spec = |init_mutex| ConstraintSpec::Problem {
            domain: domain.clone(),
            prefix: "(define (problem p) (:domain blocksworld-4ops) (:objects ".into(),
            limits: onebrain_model::GrammarLimits::default(),
            avoid: vec![],
            forbid_goal_at_init: false,
            init_mutex,
        };
        let env = onebrain_model::TokenEnv::bytes();
        // Whether the constraint lets `text` through, every byte allowed where it comes.
        let passes = |spec: &ConstraintSpec, text: &str| {
            let mut c = spec.build(&env, 400).unwrap();
            text.bytes().all(|b| c.allowed().unwrap().is_allowed(u32::from(b)) && c.consume(u32::from(b)).is_ok())
        };
        let held_and_empty = "a b) (:init (holding a) (handempty)";
        let on_two = "a b c) (:init (on a b) (on a c)";
        let possible = "a b c) (:init (holding a) (on b c) (ontable c) (clear b)) (:goal (and (on a b))))";
        for text in [held_and_empty, on_two] {
            assert!(passes(&spec(vec![]), text), "the rule is off: {text}");
            assert!(!passes(&spec(groups.clone()), text), "{text}");
        }
        assert!(passes(&spec(groups), possible));
    }
}

