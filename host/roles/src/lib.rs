//! Prompts, the multi-role episode (Actor -> verifier -> Judge -> Editor) and baseline strategies.
#![deny(missing_docs)]
