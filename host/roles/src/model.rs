//! The language model as the episode sees it: generate in a role, and score with the Judge.
//!
//! [`LanguageModel`] is implemented for `onebrain_model::Brain`; tests use a scripted double
//! that returns prepared outputs, so the control flow and the budget can be checked exactly.

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
}
