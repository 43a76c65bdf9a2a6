//! ToT: propose next steps for each frontier node, value them, keep the best, and validate
//! the nodes the model calls complete.

use onebrain_model::{Generation, Role, SamplingConfig};

use super::{Episode, Phase, Request};
use crate::plan::{parse_plan_lines, validate_plan};
use crate::record::{Event, StepTimings};

/// ToT's search state.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Search {
    pub(super) depth: usize,
    pub(super) frontier: Vec<Vec<String>>,
    pub(super) candidates: Vec<Vec<String>>,
    pub(super) values: Vec<f32>,
    /// Nodes the model called complete, to validate.
    pub(super) complete: Vec<Vec<String>>,
    pub(super) validated: Vec<Vec<String>>,
    pub(super) generations: u32,
}

impl Episode {
    pub(super) fn propose(&mut self, node: usize, j: usize) -> Request {
        let prompt = self.ctx.tot_propose(&self.search.frontier[node]);
        let sampling = self
            .cfg
            .sampling(self.search.generations, self.cfg.tot.max_tokens, true);
        // One step of the domain's actions over the task's objects, or `done)`: without it
        // the base model proposed `(put-down orange orange)` to a one-argument action. The
        // grammar ends the step at its `)`; free decoding needs stop strings, and a grammar
        // must not get `\n`, which it allows between arguments.
        let constraint = self.constraint(self.search.generations);
        let stop = if constraint.is_some() { Vec::new() } else { vec![")".into(), "\n".into()] };
        let sampling = SamplingConfig { stop, constraint, ..sampling };
        self.search.generations += 1;
        self.ask(Phase::Proposing { node, j }, Role::Actor, prompt, sampling)
    }

    pub(super) fn on_proposal(&mut self, node: usize, j: usize, g: Generation) -> Request {
        let (role, prompt, sampling) = self.pending.take().expect("a proposal was asked for");
        let index = self.search.generations - 1;
        let step = self.step_from(index, "propose", role, prompt, &g, sampling);
        self.record.timings.generation_ms += step.timings.prefill_ms + step.timings.decode_ms;
        let text = format!("({})", g.text.trim().trim_end_matches(')'));
        self.events.push(Event::Generated {
            task_id: self.record.task_id.clone(),
            index,
            role: Role::Actor,
            kind: "propose".into(),
            text: text.clone(),
            tokens: g.tokens.len(),
            secs: g.prefill_secs + g.decode_secs,
        });
        self.record.steps.push(step);
        let base = self.search.frontier[node].clone();
        match parse_plan_lines(&text).into_iter().next() {
            // `(done)` (or nothing usable) marks the node complete.
            None => {
                if !base.is_empty()
                    && !self.search.complete.contains(&base)
                    && !self.search.validated.contains(&base)
                {
                    self.search.complete.push(base);
                }
            }
            Some(action) => {
                let mut cand = base;
                cand.push(action);
                if !self.search.candidates.contains(&cand) {
                    self.search.candidates.push(cand);
                }
            }
        }
        if j + 1 < self.cfg.tot.proposals {
            self.propose(node, j + 1)
        } else if node + 1 < self.search.frontier.len() {
            self.propose(node + 1, 0)
        } else {
            self.search.values.clear();
            self.value_or_advance()
        }
    }

    fn value_or_advance(&mut self) -> Request {
        let c = self.search.values.len();
        if c < self.search.candidates.len() {
            self.phase = Phase::Valuing { c };
            return Request::Judge {
                prompt: self.ctx.tot_value(&self.search.candidates[c]),
            };
        }
        self.tot_next()
    }

    pub(super) fn on_value(&mut self, c: usize, score: f32, secs: f64) -> Request {
        self.record.timings.judge_ms += secs * 1e3;
        self.search.values.push(score);
        debug_assert_eq!(self.search.values.len(), c + 1);
        self.value_or_advance()
    }

    /// After a depth: validate completed nodes (one budget unit each), then keep the best
    /// candidates and go one level deeper, or validate the leaves at the depth limit.
    pub(super) fn tot_next(&mut self) -> Request {
        if let Some(node) = self.search.complete.pop() {
            return self.validate_node(node);
        }
        if !self.search.candidates.is_empty() {
            let mut ranked: Vec<(f32, Vec<String>)> = self
                .search
                .values
                .iter()
                .copied()
                .zip(self.search.candidates.drain(..))
                .collect();
            // Stable sort: ties keep proposal order, so greedy proposals come first.
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
            ranked.truncate(self.cfg.tot.breadth);
            self.search.frontier = ranked.into_iter().map(|(_, p)| p).collect();
            self.search.values.clear();
            self.search.depth += 1;
            if self.search.depth >= self.cfg.tot.max_depth {
                // The depth limit: the kept leaves are the answers.
                self.search.complete = self.search.frontier.drain(..).rev().collect();
                return self.tot_next();
            }
            return self.propose(0, 0);
        }
        self.done()
    }

    fn validate_node(&mut self, node: Vec<String>) -> Request {
        self.search.validated.push(node.clone());
        let reference = self
            .input
            .task
            .reference
            .as_ref()
            .expect("checked at start");
        let verdict = validate_plan(reference, &node);
        let index = self.search.generations;
        let mut step = self
            .record
            .steps
            .last()
            .cloned()
            .expect("a proposal came first");
        step.index = index;
        step.kind = "validate".into();
        step.output = node.join("\n");
        step.output_tokens = Vec::new();
        step.output_logprobs = Vec::new();
        step.timings = StepTimings::default();
        self.record.steps.push(step);
        let at = self.record.steps.len() - 1;
        self.on_verified(at, verdict)
    }
}
