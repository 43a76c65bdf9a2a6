//! Grammar-constrained decoding for PDDL answers, on [llguidance].
//!
//! A small model asked for PDDL writes wrong syntax, invents predicates and repeats one fact
//! until the token cap. This crate makes those outputs impossible, so the mistakes left are
//! semantic (a wrong fact, a missing object), which is what the verifier's diagnostics, the
//! Editor and RL are for.
//!
//! | piece | what |
//! |---|---|
//! | [`Vocabulary`], [`problem_file`], [`domain_file`], … | Lark grammars built from a domain's predicates, types, constants and actions |
//! | [`TokenEnv`] | a model's vocabulary as llguidance sees it (token trie, parser factory), built once |
//! | [`DomainSize`], [`DOMAIN_BOUNDS`] | what a domain may hold for a grammar to be built from it |
//! | [`ConstraintSpec`] | what an answer must be, as data stored with each generation |
//! | [`MutexGroup`] | a domain's "at most one of these atoms" group, which `:init` may not break |
//! | [`TokenConstraint`] | the live mask: [`TokenConstraint::allowed`], [`TokenConstraint::consume`], forced tokens |
//! | [`GuardRule`], [`Relaxation`] | a rule on top of the grammar, and where it gave way rather than refuse every token |
//!
//! A problem is constrained in stages: while the objects are declared, facts may use any
//! name; once `(:objects …)` closes, the grammar is rebuilt over the declared names (typed)
//! and the answer so far replayed into it. A guard on top refuses a token when every way of
//! finishing the fact it writes would repeat a stated fact, when a section is full, or when
//! the tokens left could not close the answer, so no constrained answer runs to the cap. In
//! `full` mode a domain guard does the same for the domain (no name, declaration or literal
//! twice) and holds each action's literals to the declared predicates with their arity, the
//! action's parameters and the declared constants.
//!
//! # Example
//!
//! ```
//! use onebrain_grammar::{problem_file, Limits, Objects, TokenEnv, Vocabulary};
//!
//! let domain = onebrain_pddl::parse_domain(
//!     "(define (domain bw) (:predicates (on ?x ?y) (clear ?x))
//!      (:action noop :parameters (?x) :precondition (clear ?x) :effect (clear ?x)))",
//! ).unwrap();
//! let grammar = problem_file(&Vocabulary::of(&domain), &Objects::Unknown, &Limits::default());
//! let env = TokenEnv::bytes();
//! let ok = "(define (problem p) (:domain bw) (:objects a b) (:init (on a b)) (:goal (and (clear a))))";
//! assert!(env.accepts(&grammar, ok).is_ok());
//! // A predicate the domain does not declare, or the wrong arity, is not a sentence.
//! assert!(env.accepts(&grammar, &ok.replace("(clear a)", "(holding a)")).is_err());
//! assert!(env.accepts(&grammar, &ok.replace("(on a b)", "(on a)")).is_err());
//! ```
#![deny(missing_docs)]

mod bounds;
mod constraint;
mod domain_guard;
mod env;
mod guard;
mod guard_rule;
mod lark;
mod mutex;
mod stats;

pub use bounds::{parser_limits, DomainBounds, DomainSize, DOMAIN_BOUNDS, MAX_GRAMMAR_BYTES};
pub use constraint::{ConstraintSpec, TokenConstraint, TokenSet};
pub use stats::{ConstraintStats, Relaxation};
pub use guard_rule::GuardRule;
pub use env::{ParserFigures, TokenEnv, Tokenize};
pub use mutex::{MutexGroup, MutexPart};
pub use lark::{
    domain_file, full_continuation, next_action, plan_answer, problem_continuation, problem_file, Limits, Objects,
    Vocabulary,
};

/// What can go wrong building or applying a constraint.
#[derive(Debug, thiserror::Error)]
pub enum GrammarError {
    /// The token vocabulary cannot be turned into a trie.
    #[error("token vocabulary: {0}")]
    Env(String),
    /// llguidance refused a grammar we built (a bug in this crate).
    #[error("grammar: {0}")]
    Grammar(String),
    /// The domain the grammar is built from does not parse.
    #[error("the domain does not parse: {0}")]
    Domain(String),
    /// Computing a mask or advancing the parser failed.
    #[error("constraint: {0}")]
    Mask(String),
    /// A token sequence does not follow the constraint (replaying stored tokens).
    #[error("token {token} at position {position} is not allowed by the constraint")]
    Replay {
        /// 0-based position in the answer.
        position: usize,
        /// The token.
        token: u32,
    },
    /// A domain, or a grammar built from one, is past a bound ([`DomainBounds`],
    /// [`MAX_GRAMMAR_BYTES`]): nothing is built from it.
    #[error("{input} is too large to constrain decoding with: {figure} {what}, past the limit of {limit}")]
    TooLarge {
        /// What was measured: the domain by name, or a grammar.
        input: String,
        /// What the figure counts.
        what: &'static str,
        /// The figure.
        figure: usize,
        /// Its bound.
        limit: usize,
    },
    /// Text is not a sentence of the grammar.
    #[error("line {line} (byte {offset}): {message}")]
    Rejected {
        /// Byte offset where the text left the grammar.
        offset: usize,
        /// 1-based line of that offset.
        line: usize,
        /// llguidance's reason.
        message: String,
    },
}
