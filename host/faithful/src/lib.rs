//! The reference faithfulness checker.
#![deny(missing_docs)]
