//! What a request to the model is estimated to hold: a plain record, so that the error that
//! refuses a request can carry it without reaching back into the arithmetic that made it
//! ([`crate::budget`], which computes it and returns that error).

/// What a request of `rows` rows of `positions` positions each is estimated to hold, MiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryEstimate {
    /// The weights as loaded.
    pub model_mib: f64,
    /// Keys and values of every row's positions, with room to grow and the batch's copy:
    /// rows × positions × layers × 2 (K and V) × KV heads (not query heads) × head dim ×
    /// 4 bytes (f32, the cache's dtype on the CPU; a CUDA cache in bf16 holds half), × 2
    /// (`budget`'s `KV_GROWTH`) × 1.5 (the heap's slack). For the 1.5B, 16 rows of 1,167 positions
    /// hold 1,021 MiB of live keys and values and are estimated at 3,063 MiB.
    pub kv_mib: f64,
    /// One prefill forward's attention scores, their softmax and its activations.
    pub work_mib: f64,
}

impl MemoryEstimate {
    /// What the request adds to the weights, MiB.
    pub fn request_mib(&self) -> f64 {
        self.kv_mib + self.work_mib
    }

    /// Weights and request, MiB.
    pub fn total_mib(&self) -> f64 {
        self.model_mib + self.request_mib()
    }
}
