//! What the kernels refuse: a matrix or input of a shape they cannot take, or candle's own
//! error from the tensors around them.

/// An error from a kernel.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A matrix or input the kernel cannot take.
    #[error("{what}: {reason}")]
    Refused {
        /// What was refused (a quantized matrix, an embedding row, a product's input).
        what: String,
        /// Why.
        reason: String,
    },
    /// candle failed on the tensors a kernel reads or writes.
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

/// A kernel's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn refused(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Refused { what: what.into(), reason: reason.into() }
    }
}
