//! The prompt heads an update reads (`detach-prompt`): keys and values of the current
//! parameters, computed once per distinct prompt and shared by its samples.

use std::collections::HashMap;

use onebrain_model::{Brain, PromptHead, Role};

use crate::error::TrainError;

/// Prompt heads, by role and tokens: keys and values of the current parameters, read from
/// those the rollouts' sampler kept or computed here, dropped after every optimizer step.
///
/// At most one head per role is kept: a new head is grown from the role's previous one (the
/// longest shared prefix it has: prompts of one domain share ~800 tokens of system text and
/// domain PDDL), which it then replaces. Callers visit samples in prompt order
/// ([`by_prompt`]), so every sample of a prompt finds its head, and the next prompt shares
/// the most with the one before. Keeping every head of a minibatch instead held about 35 MB
/// per distinct prompt on the 0.5B model, over a gigabyte for 16 episodes.
#[derive(Default)]
pub(crate) struct UpdateHeads {
    by_role: HashMap<Role, PromptHead>,
    /// The policy's heads taken from the sampler's, and computed here, since the update began.
    kept: usize,
    computed: usize,
}

impl UpdateHeads {
    /// The head of `tokens` for `role`, grown from the role's previous head.
    pub(crate) fn get(
        &mut self,
        brain: &Brain,
        role: Role,
        tokens: &[u32],
    ) -> Result<&PromptHead, TrainError> {
        if self.by_role.get(&role).is_none_or(|h| h.tokens() != tokens) {
            let h = brain.extend_prompt_head(role, tokens, self.by_role.get(&role))?;
            // The Judge's heads end `judge-tail` tokens early: never the sampler's.
            match (role, h.was_kept()) {
                (Role::Judge, _) => {}
                (_, true) => self.kept += 1,
                (_, false) => self.computed += 1,
            }
            self.by_role.insert(role, h);
        }
        Ok(&self.by_role[&role])
    }

    /// Drops every head (the parameters they were computed with are about to change).
    pub(crate) fn clear(&mut self) {
        self.by_role.clear();
    }

    /// The Actor's and Editor's heads taken from the sampler, and computed here, so far.
    pub(crate) fn kept_and_computed(&self) -> (usize, usize) {
        (self.kept, self.computed)
    }
}

/// `idx` sorted by the prompt `prompt_of` gives each (stable: equal prompts keep their order),
/// so that [`UpdateHeads`] computes each prompt head once. The gradient is a sum over samples,
/// so the order changes only its rounding.
pub(crate) fn by_prompt<'a>(idx: &[usize], prompt_of: impl Fn(usize) -> &'a [u32]) -> Vec<usize> {
    let mut sorted = idx.to_vec();
    sorted.sort_by(|&a, &b| prompt_of(a).cmp(prompt_of(b)));
    sorted
}
