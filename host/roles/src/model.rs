//! The language model as the episode sees it: generate in a role, and score with the Judge.
//!
//! [`LanguageModel`] is implemented for `onebrain_model::Brain`; tests use a scripted double
//! that returns prepared outputs, so the control flow and the budget can be checked exactly.
//! [`LanguageModel::generate_many`] and [`LanguageModel::judge_many`] answer several
//! episodes' requests in one call ([`crate::run_pipelined`] gathers them); by default they
//! loop over the single calls, and `Brain` decodes the rows as one batch.

use onebrain_core::BoxError;
use onebrain_model::{Brain, Generation, Role, SamplingConfig};

/// One model playing the three roles.
pub trait LanguageModel {
    /// Generates a continuation of `prompt` in `role`.
    fn generate(
        &mut self,
        role: Role,
        prompt: &str,
        sampling: &SamplingConfig,
    ) -> Result<Generation, BoxError>;
    /// The Judge's score s_J ∈ (0, 1) of a Judge prompt.
    fn judge(&mut self, prompt: &str) -> Result<f32, BoxError>;
    /// A short name for reports (the model file).
    fn name(&self) -> String;

    /// One result per request, in order: what [`LanguageModel::generate`] would give each,
    /// though a model may decode them together (each row still samples with its own seed,
    /// constraint and limits). The default calls `generate` on each in turn.
    fn generate_many(
        &mut self,
        requests: &[(Role, String, SamplingConfig)],
    ) -> Vec<Result<Generation, BoxError>> {
        requests
            .iter()
            .map(|(role, prompt, sampling)| self.generate(*role, prompt, sampling))
            .collect()
    }

    /// The Judge's score of each prompt, in order; the default calls
    /// [`LanguageModel::judge`] on each in turn.
    fn judge_many(&mut self, prompts: &[String]) -> Vec<Result<f32, BoxError>> {
        prompts.iter().map(|p| self.judge(p)).collect()
    }
}

/// `M` with the batched calls' default bodies: every request runs alone, in order, as
/// rollouts did before [`crate::run_pipelined`] batched them (a baseline for comparisons,
/// e.g. the old path of `onebrain bench training`).
pub struct OneAtATime<M>(pub M);

impl<M: LanguageModel> LanguageModel for OneAtATime<M> {
    fn generate(
        &mut self,
        role: Role,
        prompt: &str,
        sampling: &SamplingConfig,
    ) -> Result<Generation, BoxError> {
        self.0.generate(role, prompt, sampling)
    }

    fn judge(&mut self, prompt: &str) -> Result<f32, BoxError> {
        self.0.judge(prompt)
    }

    fn name(&self) -> String {
        self.0.name()
    }
}

/// Encodes and checks each prompt; `Err` for those that would fail a batched call alone.
fn encode_rows(brain: &Brain, prompts: &[&str]) -> Vec<Result<Vec<u32>, String>> {
    prompts
        .iter()
        .map(|p| {
            let tokens = brain.encode(p).map_err(|e| e.to_string())?;
            brain.check_prompt(&tokens).map_err(|e| e.to_string())?;
            Ok(tokens)
        })
        .collect()
}

impl LanguageModel for Brain {
    fn generate(
        &mut self,
        role: Role,
        prompt: &str,
        sampling: &SamplingConfig,
    ) -> Result<Generation, BoxError> {
        Ok(Brain::generate(self, role, prompt, sampling)?)
    }

    fn judge(&mut self, prompt: &str) -> Result<f32, BoxError> {
        Ok(Brain::judge(self, prompt)?)
    }

    /// The requests of each role decode as one batch ([`Brain::generate_rows_each`]). A
    /// row whose prompt or sampling config is bad, or whose constraint fails, fails alone;
    /// an error of the batch itself (a failed forward) fails each of its rows with the same
    /// message.
    fn generate_many(
        &mut self,
        requests: &[(Role, String, SamplingConfig)],
    ) -> Vec<Result<Generation, BoxError>> {
        let mut out: Vec<Option<Result<Generation, BoxError>>> =
            (0..requests.len()).map(|_| None).collect();
        for role in Role::ALL {
            let mine: Vec<usize> = (0..requests.len()).filter(|&i| requests[i].0 == role).collect();
            if mine.is_empty() {
                continue;
            }
            let prompts: Vec<&str> = mine.iter().map(|&i| requests[i].1.as_str()).collect();
            let mut rows = Vec::new();
            for (&i, encoded) in mine.iter().zip(encode_rows(self, &prompts)) {
                match encoded.and_then(|t| requests[i].2.validate().map(|_| t).map_err(|e| e.to_string())) {
                    Ok(tokens) => rows.push((i, tokens)),
                    Err(e) => out[i] = Some(Err(e.into())),
                }
            }
            if rows.is_empty() {
                continue;
            }
            let tokens: Vec<Vec<u32>> = rows.iter().map(|(_, t)| t.clone()).collect();
            let samplings: Vec<SamplingConfig> = rows.iter().map(|(i, _)| requests[*i].2.clone()).collect();
            match self.generate_rows_each(role, &tokens, &samplings) {
                Ok(gens) => {
                    for ((i, _), g) in rows.iter().zip(gens) {
                        out[*i] = Some(g.map_err(BoxError::from));
                    }
                }
                Err(e) => {
                    let message = e.to_string();
                    for (i, _) in &rows {
                        out[*i] = Some(Err(message.clone().into()));
                    }
                }
            }
        }
        out.into_iter().map(|o| o.expect("every request has a role")).collect()
    }

    /// The prompts prefilled as one batch ([`Brain::judge_tokens`]); a bad prompt fails
    /// alone, an error of the batch fails each of its rows with the same message.
    fn judge_many(&mut self, prompts: &[String]) -> Vec<Result<f32, BoxError>> {
        let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
        let mut out: Vec<Option<Result<f32, BoxError>>> = (0..prompts.len()).map(|_| None).collect();
        let mut rows = Vec::new();
        for (i, encoded) in encode_rows(self, &refs).into_iter().enumerate() {
            match encoded {
                Ok(tokens) => rows.push((i, tokens)),
                Err(e) => out[i] = Some(Err(e.into())),
            }
        }
        if !rows.is_empty() {
            let tokens: Vec<Vec<u32>> = rows.iter().map(|(_, t)| t.clone()).collect();
            match self.judge_tokens(&tokens) {
                Ok(scores) => {
                    for ((i, _), s) in rows.iter().zip(scores) {
                        out[*i] = Some(Ok(s));
                    }
                }
                Err(e) => {
                    let message = e.to_string();
                    for (i, _) in &rows {
                        out[*i] = Some(Err(message.clone().into()));
                    }
                }
            }
        }
        out.into_iter().map(|o| o.expect("every prompt answered")).collect()
    }

    fn name(&self) -> String {
        self.source().path().file_name().map_or_else(
            || self.source().path().display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }
}

impl<M: LanguageModel + ?Sized> LanguageModel for &mut M {
    fn generate(
        &mut self,
        role: Role,
        prompt: &str,
        sampling: &SamplingConfig,
    ) -> Result<Generation, BoxError> {
        (**self).generate(role, prompt, sampling)
    }

    fn judge(&mut self, prompt: &str) -> Result<f32, BoxError> {
        (**self).judge(prompt)
    }

    fn name(&self) -> String {
        (**self).name()
    }

    fn generate_many(
        &mut self,
        requests: &[(Role, String, SamplingConfig)],
    ) -> Vec<Result<Generation, BoxError>> {
        (**self).generate_many(requests)
    }

    fn judge_many(&mut self, prompts: &[String]) -> Vec<Result<f32, BoxError>> {
        (**self).judge_many(prompts)
    }
}
