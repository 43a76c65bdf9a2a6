//! onebrain's CPU compute kernels: the ops the model runs where candle's own are too slow or
//! keep too much memory, each a candle custom op or a plain function over `f32` slices.
//!
//! * [`TiledMatrix`]: Q8_0, Q5_0, Q4_K and Q6_K matrix products on AVX-512 VNNI or AVX2, the
//!   kernel picked at run time ([`Kernel`]); [`FrozenProduct`] and [`FrozenQuant`] put a
//!   frozen quantized product inside a training graph with an input-only backward.
//! * [`DecodeAttention`]: one new position over the KV cache; [`CausalAttention`]: the
//!   learner's causal attention with a backward that keeps no score matrix;
//!   [`CausalSoftmax`]: the causal softmax it replaced, kept for comparison.
//! * [`SwiGlu`]: the MLP's gate `silu(gate) · up` as one op with one backward pass.
//!
//! None of them knows the model: they take tensors and slices and give the same numbers on
//! every kernel a CPU may pick.
//!
//! ```
//! use onebrain_kernels::{dot, dots, DOTS};
//!
//! let q = [1.0f32; 16];
//! let keys = [[2.0f32; 16]; DOTS];
//! let together = dots(&q, std::array::from_fn(|n| &keys[n][..]));
//! assert_eq!(together[0], dot(&q, &keys[0]));
//! ```
#![deny(missing_docs)]

mod attention;
mod causal_attention;
mod cpu_matmul;
mod error;
pub mod pool;
mod frozen;
mod swiglu;

pub use attention::{dot, dots, CausalSoftmax, DecodeAttention, DOTS};
pub use causal_attention::{slice, span, CausalAttention};
pub use cpu_matmul::{quantize_activations, FrozenProduct, Kernel, TiledMatrix};
pub use error::{Error, Result};
pub use frozen::FrozenQuant;
pub use swiglu::SwiGlu;
