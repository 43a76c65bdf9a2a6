//! The model's memory around an update: what generation holds is freed before the update's
//! activations need the room, and what only the update reads is freed after it. Nothing here
//! changes what the update computes.

use onebrain_model::Brain;

use crate::error::TrainError;

/// Entering and leaving an update, on the learner's model.
pub(crate) trait UpdateMemory {
    /// Frees generation's prompt prefixes, then builds the Wᵀ copies the backward reads.
    fn enter_update(&mut self) -> Result<(), TrainError>;
    /// Frees what only the update read: prompt caches of the old parameters and, with
    /// `free-transposed`, the Wᵀ copies.
    fn leave_update(&mut self);
}

impl UpdateMemory for Brain {
    fn enter_update(&mut self) -> Result<(), TrainError> {
        // Generation's prompt prefixes are of no use from here (the forward passes read the
        // kept prompt heads): freed now, they leave room for the update's activations.
        self.forget_prompt_prefixes();
        release_free_memory();
        // Wᵀ copies freed after the last update (`free-transposed`) are built again, into
        // the room the prefixes left rather than on top of them (nothing above reads them).
        self.prepare_training()?;
        Ok(())
    }

    fn leave_update(&mut self) {
        // Generation must not reuse prompt caches computed under the old parameters; the
        // fingerprint check would catch it, dropping them frees the memory now.
        self.clear_prefix_cache();
        // Only the update reads the Wᵀ copies: the rollouts until the next need not hold them.
        if self.config().free_transposed {
            self.forget_transposed();
        }
        release_free_memory();
    }
}

/// Gives the pages of freed memory back to the system. glibc keeps a freed heap region
/// mapped for reuse, so without this a run's resident memory follows the largest update so
/// far (the longest batch's activations) rather than what is live.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it touches no live
    // allocation and is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
