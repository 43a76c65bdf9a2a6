//! Prompt heads kept from sampling for the next update: the keys and values of each
//! prompt but its last token, as the sampler's prefill computed them.
//!
//! With `detach-prompt` the learner needs, for every sampled prompt, its keys and values up to
//! the last token, with no graph: exactly what the sampler's prefill computed moments before,
//! on the same tiles and role parameters. Recomputing them was over a third of an update of
//! the 0.5B model on 2 cores (about 62 of 168 s). Keeping them costs their memory:
//! they are kept in f16, as llama.cpp's KV cache holds them, about 12 KB a position on the
//! 0.5B model, so a step's prompts hold some 0.3 GB (0.6 GB in f32 took the update's peak
//! past 4 GB); past [`CAPACITY_BYTES`] a prompt is not kept and the learner computes its head
//! as before. The learner's π_old is its own first forward after the head it took, so the
//! rounding moves only the distance to the sampler's log-probabilities (`losses/sampler_gap`).

use std::{collections::HashMap, sync::Mutex};

use candle_core::DType;

use crate::{config::Role, transformer::KvCache, Result};

/// Bytes of keys and values kept at most.
const CAPACITY_BYTES: u64 = 1 << 30;

#[derive(Debug, Default)]
pub(super) struct PromptHeads {
    /// The roles whose prompts prefill keeps (none outside a training step's rollouts).
    roles: Vec<Role>,
    inner: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    /// By role and prompt head (the prompt less its last token): the role's parameter
    /// fingerprint when it was computed, and the keys and values (role tokens first).
    entries: HashMap<(Role, Vec<u32>), (u64, KvCache)>,
    bytes: u64,
}

impl PromptHeads {
    pub(super) fn set_roles(&mut self, roles: &[Role]) {
        self.roles = roles.to_vec();
    }

    pub(super) fn keeps(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// Whether anything is kept for `role` (so a lookup is worth a fingerprint).
    pub(super) fn has_any(&self, role: Role) -> bool {
        self.lock().entries.keys().any(|(r, _)| *r == role)
    }

    /// Keeps `kv` (f32) as `role`'s head `head` under parameters `fp`, unless the store is
    /// full.
    pub(super) fn insert(&self, role: Role, fp: u64, head: &[u32], kv: &KvCache) -> Result<()> {
        let key = (role, head.to_vec());
        if self.lock().entries.contains_key(&key) {
            return Ok(());
        }
        let kv = kv.to_dtype(DType::F16)?;
        let bytes = kv_bytes(&kv);
        let mut kept = self.lock();
        if kept.bytes + bytes <= CAPACITY_BYTES {
            kept.bytes += bytes;
            kept.entries.insert(key, (fp, kv));
        }
        Ok(())
    }

    /// `role`'s head `head` if it was computed under parameters `fp`. It stays held for
    /// later lookups under the same parameters: a PPO update reads each head in its scoring
    /// pass and again in its first minibatch, before the first step. A lookup under other
    /// parameters (a step since) drops it: parameters only move on, so it can never serve.
    pub(super) fn get(&self, role: Role, fp: u64, head: &[u32]) -> Result<Option<KvCache>> {
        let kv = {
            let mut kept = self.lock();
            let key = (role, head.to_vec());
            match kept.entries.get(&key) {
                None => return Ok(None),
                Some((f, kv)) if *f == fp => kv.clone(),
                Some(_) => {
                    let (_, stale) = kept.entries.remove(&key).expect("present");
                    kept.bytes -= kv_bytes(&stale);
                    return Ok(None);
                }
            }
        };
        Ok(Some(kv.to_dtype(DType::F32)?))
    }

    pub(super) fn clear(&self) {
        let mut kept = self.lock();
        kept.entries.clear();
        kept.bytes = 0;
    }

    /// Bytes held now.
    pub(super) fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // A panic while holding the lock leaves plain data behind, still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn kv_bytes(kv: &KvCache) -> u64 {
    kv.layers.iter().flatten().map(|l| l.buffer_bytes()).sum()
}
