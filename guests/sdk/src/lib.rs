//! Write onebrain plugins in Rust.
//!
//! A plugin is a WebAssembly component that implements one world of the
//! `onebrain:plugin` WIT package. This crate hides the bindings: implement
//! one trait and call its export macro.
//!
//! | world | trait | macro |
//! |---|---|---|
//! | `reward` | [`Reward`] | [`export_reward!`] |
//! | `domain-adapter` | [`DomainAdapter`] | [`export_domain_adapter!`] |
//! | `diagnostic-parser` | [`DiagnosticParser`] (`parse` the planner's output, `review` a spec against the task text) | [`export_diagnostic_parser!`] |
//! | `faithfulness-checker` | [`FaithfulnessChecker`] | [`export_faithfulness_checker!`] |
//!
//! The plugin type must implement [`Default`]; one value lives for the life
//! of the instance (the host may reuse an instance for many calls, or start a
//! fresh one after a failure). Every trait method has a default body that
//! returns "not implemented", so a plugin overrides only what it serves.
//!
//! [`gaming`] holds four reference-free checks that a solved spec was not gamed
//! (goal already true, empty plan, a named object left out, an unguarded
//! action), the ones the bundled `grounded-rewards` plugin multiplies in.
//!
//! [`pddl`] re-exports `onebrain-pddl`, the parser, checker, grounder and
//! plan validator the host itself uses, so a domain plugin reads PDDL without
//! a parser of its own.
//!
//! A reward sees the whole episode: here, the Actor is paid for a solved spec only
//! when its plan is not empty (a goal that already holds at the start is a gamed
//! spec, not a solved task).
//!
//! ```no_run
//! use onebrain_sdk::{FinishedEpisode, Result, Reward, Rewards};
//!
//! #[derive(Default)]
//! struct NonEmptyPlan;
//!
//! impl Reward for NonEmptyPlan {
//!     fn rewards(&self, ep: &FinishedEpisode) -> Result<Rewards> {
//!         let first = ep.steps.first().map(|s| &s.verdict);
//!         let paid = first.is_some_and(|v| v.solved && !v.plan.is_empty());
//!         Ok(Rewards { actor: if paid { 1.0 } else { 0.0 }, ..Rewards::default() })
//!     }
//! }
//!
//! onebrain_sdk::export_reward!(NonEmptyPlan);
//! ```
#![deny(missing_docs)]

pub mod blocks;
pub mod gaming;
mod rng;
pub mod text;
mod types;
mod worlds;

pub use onebrain_pddl as pddl;
pub use types::{
    Category, Decision, Diagnostic, Drift, FaithfulnessReport, FinishedEpisode, Outcome, RewardSettings,
    Rewards, Severity, SolverOutput, Spec, SpecFile, Step, StepRole, Task, Verdict,
};
pub use rng::Rng;
pub use worlds::{DiagnosticParser, DomainAdapter, FaithfulnessChecker, Reward};

/// The result every plugin method returns; the error is a message the host
/// reports with the plugin's name and version.
pub type Result<T, E = String> = std::result::Result<T, E>;

/// The paper's Judge reward for `ep`: the Judge is scored on the Actor's first spec (b_0),
/// +1 / −1 when it says "solvable" (s_J > τ), +0.5 / −0.5 when it says "not" (s_J ≤ τ).
/// Any reward that keeps the Judge predicting the solver can return it as is.
pub fn paper_judge_reward(ep: &FinishedEpisode) -> f32 {
    match (ep.judge_score > ep.settings.judge_threshold, ep.b0()) {
        (true, true) => 1.0,
        (true, false) => -1.0,
        (false, false) => 0.5,
        (false, true) => -0.5,
    }
}

/// The error a default method body returns.
pub fn not_implemented(what: &str) -> String {
    format!("{what} is not implemented by this plugin")
}

include!(concat!(env!("OUT_DIR"), "/wit_macros.rs"));

/// Glue the export macros expand to. Not part of the API.
#[doc(hidden)]
pub mod __private {
    #[cfg(target_family = "wasm")]
    pub use wit_bindgen;

    /// Writes the SDK's API version into the plugin's `onebrain:api-version`
    /// custom section: the host reads it before instantiating.
    #[macro_export]
    #[doc(hidden)]
    macro_rules! __onebrain_api_version {
        () => {
            #[doc(hidden)]
            #[used]
            #[link_section = "onebrain:api-version"]
            static __ONEBRAIN_API_VERSION: [u8; $crate::API_VERSION_BYTES.len()] =
                $crate::API_VERSION_BYTES;
        };
    }

    /// The one plugin value of the instance, created on first use.
    #[macro_export]
    #[doc(hidden)]
    macro_rules! __onebrain_instance {
        ($ty:ty) => {
            ::std::thread_local! {
                static __ONEBRAIN_PLUGIN: $ty = <$ty as ::core::default::Default>::default();
            }
        };
    }

    /// A WIT `diagnostic` (of the bindings module `$w`) as the SDK's.
    #[macro_export]
    #[doc(hidden)]
    macro_rules! __onebrain_diagnostic_from_wit {
        ($d:expr, $w:ident) => {{
            let d = $d;
            $crate::Diagnostic {
                category: $crate::__onebrain_enum!(d.category, $w::Category => $crate::Category,
                    [Syntax, ObjectType, PredicateSchema, PreconditionEffect, GoalConstraint, Unreachable, SolverError]),
                severity: $crate::__onebrain_enum!(d.severity, $w::Severity => $crate::Severity, [Error, Warning]),
                message: d.message,
                file: d.file.map(|f| $crate::__onebrain_enum!(f, $w::SpecFile => $crate::SpecFile, [Domain, Problem, Plan])),
                line: d.line,
                column: d.column,
            }
        }};
    }

    /// An SDK `Diagnostic` as a WIT `diagnostic` (of the bindings module `$w`).
    #[macro_export]
    #[doc(hidden)]
    macro_rules! __onebrain_diagnostic_to_wit {
        ($d:expr, $w:ident) => {{
            let d = $d;
            $w::Diagnostic {
                category: $crate::__onebrain_enum!(d.category, $crate::Category => $w::Category,
                    [Syntax, ObjectType, PredicateSchema, PreconditionEffect, GoalConstraint, Unreachable, SolverError]),
                severity: $crate::__onebrain_enum!(d.severity, $crate::Severity => $w::Severity, [Error, Warning]),
                message: d.message,
                file: d.file.map(|f| $crate::__onebrain_enum!(f, $crate::SpecFile => $w::SpecFile, [Domain, Problem, Plan])),
                line: d.line,
                column: d.column,
            }
        }};
    }

    /// A WIT `solver-output` as the SDK's.
    #[macro_export]
    #[doc(hidden)]
    macro_rules! __onebrain_solver_output_from_wit {
        ($o:expr) => {{
            let o = $o;
            $crate::SolverOutput { exit_code: o.exit_code, stdout: o.stdout, stderr: o.stderr, timed_out: o.timed_out }
        }};
    }

    /// Maps an enum onto its twin case by case (the WIT enums and the SDK
    /// enums have the same cases under the same names).
    #[macro_export]
    #[doc(hidden)]
    macro_rules! __onebrain_enum {
        ($v:expr, $from:path => $to:path, [$($case:ident),* $(,)?]) => {{
            use $from as __F;
            use $to as __T;
            match $v { $(__F::$case => __T::$case,)* }
        }};
    }
}

/// Exports a [`Reward`] implementation as the plugin's `reward` world.
#[macro_export]
macro_rules! export_reward {
    ($ty:ty) => {
        // Natively (a plugin's own unit tests) there is nothing to export.
        #[cfg(target_family = "wasm")]
        #[doc(hidden)]
        mod __onebrain_export {
        #[allow(unused_imports)]
        use super::*;
        #[doc(hidden)]
        mod __onebrain_bindings {
            $crate::__onebrain_wit_reward!();
        }
        $crate::__onebrain_api_version!();
        $crate::__onebrain_instance!($ty);
        #[doc(hidden)]
        struct __OnebrainExport;
        impl __onebrain_bindings::Guest for __OnebrainExport {
            fn episode_rewards(
                ep: __onebrain_bindings::onebrain::plugin::types::FinishedEpisode,
            ) -> ::core::result::Result<
                __onebrain_bindings::onebrain::plugin::types::Rewards,
                ::std::string::String,
            > {
                use __onebrain_bindings::onebrain::plugin::types as w;
                let step = |s: w::Step| $crate::Step {
                    role: $crate::__onebrain_enum!(s.role, w::StepRole => $crate::StepRole, [Actor, Editor]),
                    spec: s.spec.map(|x| $crate::Spec { domain: x.domain, problem: x.problem }),
                    verdict: $crate::Verdict {
                        solved: s.verdict.solved,
                        outcome: $crate::__onebrain_enum!(s.verdict.outcome, w::Outcome => $crate::Outcome,
                            [Solved, Rejected, Unsolvable, Timeout, OutOfMemory, InputError, SolverError]),
                        plan: s.verdict.plan,
                        diagnostics: s
                            .verdict
                            .diagnostics
                            .into_iter()
                            .map(|d| $crate::__onebrain_diagnostic_from_wit!(d, w))
                            .collect(),
                        time_ms: s.verdict.time_ms,
                        solver_time_ms: s.verdict.solver_time_ms,
                        solver_output: s.verdict.solver_output.map(|o| $crate::__onebrain_solver_output_from_wit!(o)),
                    },
                    output_tokens: s.output_tokens,
                };
                let ep = $crate::FinishedEpisode {
                    task_id: ep.task_id,
                    domain: ep.domain,
                    task_text: ep.task_text,
                    steps: ep.steps.into_iter().map(step).collect(),
                    judge_score: ep.judge_score,
                    settings: $crate::RewardSettings {
                        max_repairs: ep.settings.max_repairs,
                        judge_threshold: ep.settings.judge_threshold,
                        lambda_judge: ep.settings.lambda_judge,
                        repair_cost: ep.settings.repair_cost,
                    },
                };
                let r = __ONEBRAIN_PLUGIN.with(|p| $crate::Reward::rewards(p, &ep))?;
                Ok(w::Rewards { actor: r.actor, editor: r.editor, judge: r.judge, editor_steps: r.editor_steps })
            }
        }
        __onebrain_bindings::export!(__OnebrainExport with_types_in __onebrain_bindings);
        }
    };
}

/// Exports a [`DomainAdapter`] implementation as the plugin's `domain-adapter` world.
#[macro_export]
macro_rules! export_domain_adapter {
    ($ty:ty) => {
        // Natively (a plugin's own unit tests) there is nothing to export.
        #[cfg(target_family = "wasm")]
        #[doc(hidden)]
        mod __onebrain_export {
        #[allow(unused_imports)]
        use super::*;
        #[doc(hidden)]
        mod __onebrain_bindings {
            $crate::__onebrain_wit_domain_adapter!();
        }
        $crate::__onebrain_api_version!();
        $crate::__onebrain_instance!($ty);
        #[doc(hidden)]
        struct __OnebrainExport;
        impl __onebrain_bindings::Guest for __OnebrainExport {
            fn name() -> ::std::string::String {
                __ONEBRAIN_PLUGIN.with(|p| $crate::DomainAdapter::name(p))
            }
            fn description() -> ::core::result::Result<::std::string::String, ::std::string::String> {
                __ONEBRAIN_PLUGIN.with(|p| $crate::DomainAdapter::description(p))
            }
            fn domain_pddl() -> ::core::result::Result<::std::string::String, ::std::string::String> {
                __ONEBRAIN_PLUGIN.with(|p| $crate::DomainAdapter::domain_pddl(p))
            }
            fn generate(
                seed: u64,
                size: u32,
            ) -> ::core::result::Result<
                __onebrain_bindings::onebrain::plugin::types::Task,
                ::std::string::String,
            > {
                use __onebrain_bindings::onebrain::plugin::types as w;
                let t = __ONEBRAIN_PLUGIN.with(|p| $crate::DomainAdapter::generate(p, seed, size))?;
                Ok(w::Task {
                    id: t.id,
                    domain: t.domain,
                    text: t.text,
                    reference: t.reference.map(|s| w::Spec { domain: s.domain, problem: s.problem }),
                })
            }
            fn describe(
                problem_pddl: ::std::string::String,
            ) -> ::core::result::Result<::std::string::String, ::std::string::String> {
                __ONEBRAIN_PLUGIN.with(|p| $crate::DomainAdapter::describe(p, &problem_pddl))
            }
        }
        __onebrain_bindings::export!(__OnebrainExport with_types_in __onebrain_bindings);
        }
    };
}

/// Exports a [`DiagnosticParser`] implementation as the plugin's `diagnostic-parser` world.
#[macro_export]
macro_rules! export_diagnostic_parser {
    ($ty:ty) => {
        // Natively (a plugin's own unit tests) there is nothing to export.
        #[cfg(target_family = "wasm")]
        #[doc(hidden)]
        mod __onebrain_export {
        #[allow(unused_imports)]
        use super::*;
        #[doc(hidden)]
        mod __onebrain_bindings {
            $crate::__onebrain_wit_diagnostic_parser!();
        }
        $crate::__onebrain_api_version!();
        $crate::__onebrain_instance!($ty);
        #[doc(hidden)]
        struct __OnebrainExport;
        impl __onebrain_bindings::Guest for __OnebrainExport {
            fn parse(
                raw: __onebrain_bindings::onebrain::plugin::types::SolverOutput,
                native: ::std::vec::Vec<__onebrain_bindings::onebrain::plugin::types::Diagnostic>,
            ) -> ::core::result::Result<
                ::std::vec::Vec<__onebrain_bindings::onebrain::plugin::types::Diagnostic>,
                ::std::string::String,
            > {
                use __onebrain_bindings::onebrain::plugin::types as w;
                let raw = $crate::__onebrain_solver_output_from_wit!(raw);
                let native: ::std::vec::Vec<$crate::Diagnostic> =
                    native.into_iter().map(|d| $crate::__onebrain_diagnostic_from_wit!(d, w)).collect();
                let out = __ONEBRAIN_PLUGIN.with(|p| $crate::DiagnosticParser::parse(p, &raw, &native))?;
                Ok(out.into_iter().map(|d| $crate::__onebrain_diagnostic_to_wit!(d, w)).collect())
            }
            fn review(
                task_text: ::std::string::String,
                candidate: __onebrain_bindings::onebrain::plugin::types::Spec,
                found: ::std::vec::Vec<__onebrain_bindings::onebrain::plugin::types::Diagnostic>,
            ) -> ::core::result::Result<
                ::std::vec::Vec<__onebrain_bindings::onebrain::plugin::types::Diagnostic>,
                ::std::string::String,
            > {
                use __onebrain_bindings::onebrain::plugin::types as w;
                let candidate = $crate::Spec { domain: candidate.domain, problem: candidate.problem };
                let found: ::std::vec::Vec<$crate::Diagnostic> =
                    found.into_iter().map(|d| $crate::__onebrain_diagnostic_from_wit!(d, w)).collect();
                let out = __ONEBRAIN_PLUGIN.with(|p| $crate::DiagnosticParser::review(p, &task_text, &candidate, &found))?;
                Ok(out.into_iter().map(|d| $crate::__onebrain_diagnostic_to_wit!(d, w)).collect())
            }
        }
        __onebrain_bindings::export!(__OnebrainExport with_types_in __onebrain_bindings);
        }
    };
}

/// Exports a [`FaithfulnessChecker`] implementation as the plugin's `faithfulness-checker` world.
#[macro_export]
macro_rules! export_faithfulness_checker {
    ($ty:ty) => {
        // Natively (a plugin's own unit tests) there is nothing to export.
        #[cfg(target_family = "wasm")]
        #[doc(hidden)]
        mod __onebrain_export {
        #[allow(unused_imports)]
        use super::*;
        #[doc(hidden)]
        mod __onebrain_bindings {
            $crate::__onebrain_wit_faithfulness_checker!();
        }
        $crate::__onebrain_api_version!();
        $crate::__onebrain_instance!($ty);
        #[doc(hidden)]
        struct __OnebrainExport;
        impl __onebrain_bindings::Guest for __OnebrainExport {
            fn check(
                reference: __onebrain_bindings::onebrain::plugin::types::Spec,
                candidate: __onebrain_bindings::onebrain::plugin::types::Spec,
                plan: ::core::option::Option<::std::vec::Vec<::std::string::String>>,
            ) -> ::core::result::Result<
                __onebrain_bindings::onebrain::plugin::types::FaithfulnessReport,
                ::std::string::String,
            > {
                use __onebrain_bindings::onebrain::plugin::types as w;
                let reference = $crate::Spec { domain: reference.domain, problem: reference.problem };
                let candidate = $crate::Spec { domain: candidate.domain, problem: candidate.problem };
                let r = __ONEBRAIN_PLUGIN.with(|p| {
                    $crate::FaithfulnessChecker::check(p, &reference, &candidate, plan.as_deref())
                })?;
                Ok(w::FaithfulnessReport {
                    solvable: r.solvable,
                    faithful: r.faithful,
                    goal_preserved: r.goal_preserved,
                    objects_preserved: r.objects_preserved,
                    schema_consistent: r.schema_consistent,
                    plan_replay_ok: r.plan_replay_ok,
                    schema_f1: r.schema_f1,
                    drift: r.drift.map(|d| $crate::__onebrain_enum!(d, $crate::Drift => w::Drift,
                        [GoalWeakening, TypeDrift, SchemaDrift, ConstraintOmission])),
                    decision: $crate::__onebrain_enum!(r.decision, $crate::Decision => w::Decision,
                        [Exact, Closure, Undecided]),
                    explanation: r.explanation,
                    undecided: r.undecided,
                    init_preserved: r.init_preserved,
                    work: r.work,
                })
            }
        }
        __onebrain_bindings::export!(__OnebrainExport with_types_in __onebrain_bindings);
        }
    };
}
