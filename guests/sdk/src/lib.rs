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

    /// Natively (a plugin's own unit tests) there is nothing to export, so without this the
    /// plugin's type, its methods and what they call would read as dead code there: it
    /// names the type's constructor, which the export would call.
    #[macro_export]
    #[doc(hidden)]
    macro_rules! __onebrain_native_use {
        ($ty:ty) => {
            #[cfg(not(target_family = "wasm"))]
            #[doc(hidden)]
            #[allow(dead_code)]
            fn __onebrain_native_use() {
                let _: fn() -> $ty = <$ty as ::core::default::Default>::default;
            }
        };
    }

    /// `From` both ways between the SDK's types and the plugin's generated bindings: the
    /// same list the host converts its own bindings with.
    pub use onebrain_core::wit_conversions;
}

/// Exports a [`Reward`] implementation as the plugin's `reward` world.
#[macro_export]
macro_rules! export_reward {
    ($ty:ty) => {
        $crate::__onebrain_native_use!($ty);
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
        $crate::__private::wit_conversions!(__onebrain_bindings::onebrain::plugin::types);
        #[doc(hidden)]
        struct __OnebrainExport;
        impl __onebrain_bindings::Guest for __OnebrainExport {
            fn episode_rewards(
                ep: __onebrain_bindings::onebrain::plugin::types::FinishedEpisode,
            ) -> ::core::result::Result<
                __onebrain_bindings::onebrain::plugin::types::Rewards,
                ::std::string::String,
            > {
                let ep: $crate::FinishedEpisode = ep.into();
                let r = __ONEBRAIN_PLUGIN.with(|p| $crate::Reward::rewards(p, &ep))?;
                Ok(r.into())
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
        $crate::__onebrain_native_use!($ty);
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
        $crate::__private::wit_conversions!(__onebrain_bindings::onebrain::plugin::types);
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
                let t = __ONEBRAIN_PLUGIN.with(|p| $crate::DomainAdapter::generate(p, seed, size))?;
                Ok(t.into())
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
        $crate::__onebrain_native_use!($ty);
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
        $crate::__private::wit_conversions!(__onebrain_bindings::onebrain::plugin::types);
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
                let raw: $crate::SolverOutput = raw.into();
                let native: ::std::vec::Vec<$crate::Diagnostic> = native.into_iter().map(::core::convert::Into::into).collect();
                let out = __ONEBRAIN_PLUGIN.with(|p| $crate::DiagnosticParser::parse(p, &raw, &native))?;
                Ok(out.into_iter().map(::core::convert::Into::into).collect())
            }
            fn review(
                task_text: ::std::string::String,
                candidate: __onebrain_bindings::onebrain::plugin::types::Spec,
                found: ::std::vec::Vec<__onebrain_bindings::onebrain::plugin::types::Diagnostic>,
            ) -> ::core::result::Result<
                ::std::vec::Vec<__onebrain_bindings::onebrain::plugin::types::Diagnostic>,
                ::std::string::String,
            > {
                let candidate: $crate::Spec = candidate.into();
                let found: ::std::vec::Vec<$crate::Diagnostic> = found.into_iter().map(::core::convert::Into::into).collect();
                let out = __ONEBRAIN_PLUGIN.with(|p| $crate::DiagnosticParser::review(p, &task_text, &candidate, &found))?;
                Ok(out.into_iter().map(::core::convert::Into::into).collect())
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
        $crate::__onebrain_native_use!($ty);
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
        $crate::__private::wit_conversions!(__onebrain_bindings::onebrain::plugin::types);
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
                let (reference, candidate): ($crate::Spec, $crate::Spec) = (reference.into(), candidate.into());
                let r = __ONEBRAIN_PLUGIN.with(|p| {
                    $crate::FaithfulnessChecker::check(p, &reference, &candidate, plan.as_deref())
                })?;
                Ok(r.into())
            }
        }
        __onebrain_bindings::export!(__OnebrainExport with_types_in __onebrain_bindings);
        }
    };
}
