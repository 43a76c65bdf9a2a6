//! [`wit_conversions!`](crate::wit_conversions): `From` both ways between this crate's types
//! and their twins that a WIT bindings generator makes from `wit/` (wasmtime's `bindgen!` in
//! the host, wit-bindgen's `generate!` in a plugin). The twins have the same fields and
//! enum cases under the same names, so one list below serves both sides, and a field added
//! to the WIT and to this crate is converted everywhere by adding it here once.

/// Implements `From` both ways between every record and enum the plugin worlds exchange and
/// its twin in the module `$w` (a path, as `types` or `bindings::onebrain::plugin::types`).
///
/// Expand it once per generated `types` module, in the crate that generated it (the orphan
/// rule allows the impls only there).
#[macro_export]
macro_rules! wit_conversions {
    ($w:path) => {
        const _: () = {
            use $w as w;
            $crate::__wit_enum!(w, Category [Syntax, ObjectType, PredicateSchema, PreconditionEffect, GoalConstraint, Unreachable, SolverError]);
            $crate::__wit_enum!(w, Severity [Error, Warning]);
            $crate::__wit_enum!(w, SpecFile [Domain, Problem, Plan]);
            $crate::__wit_enum!(w, Outcome [Solved, Rejected, Unsolvable, Timeout, OutOfMemory, InputError, SolverError]);
            $crate::__wit_enum!(w, StepRole [Actor, Editor]);
            $crate::__wit_enum!(w, Drift [GoalWeakening, TypeDrift, SchemaDrift, ConstraintOmission]);
            $crate::__wit_enum!(w, Decision [Exact, Closure, Undecided]);
            $crate::__wit_record!(w, Spec { domain, problem });
            $crate::__wit_record!(w, Task { id, domain, text, reference: opt });
            $crate::__wit_record!(w, Diagnostic { category, severity, message, file: opt, line, column });
            $crate::__wit_record!(w, SolverOutput { exit_code, stdout, stderr, timed_out });
            $crate::__wit_record!(w, Verdict {
                solved, outcome, plan, diagnostics: vec, time_ms, solver_time_ms, solver_output: opt,
            });
            $crate::__wit_record!(w, Step { role, spec: opt, verdict, output_tokens });
            $crate::__wit_record!(w, RewardSettings { max_repairs, judge_threshold, lambda_judge, repair_cost });
            $crate::__wit_record!(w, FinishedEpisode { task_id, domain, task_text, steps: vec, judge_score, settings });
            $crate::__wit_record!(w, Rewards { actor, editor, judge, editor_steps });
            $crate::__wit_record!(w, FaithfulnessReport {
                solvable, faithful, goal_preserved, objects_preserved, schema_consistent, plan_replay_ok,
                schema_f1, drift: opt, decision, explanation, undecided, init_preserved, work,
            });
        };
    };
}

/// An enum and its twin `$w::$name`, case by case, both ways.
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_enum {
    ($w:ident, $name:ident [$($case:ident),* $(,)?]) => {
        impl ::core::convert::From<$w::$name> for $crate::$name {
            fn from(v: $w::$name) -> Self {
                match v { $($w::$name::$case => $crate::$name::$case,)* }
            }
        }
        impl ::core::convert::From<$crate::$name> for $w::$name {
            fn from(v: $crate::$name) -> Self {
                match v { $($crate::$name::$case => $w::$name::$case,)* }
            }
        }
    };
}

/// A record and its twin `$w::$name`, field by field, both ways. A field marked `opt` is an
/// option and one marked `vec` a list of a converted type; the others convert whole (most
/// by the identity `From`).
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_record {
    ($w:ident, $name:ident { $($field:ident $(: $kind:ident)?),* $(,)? }) => {
        impl ::core::convert::From<$w::$name> for $crate::$name {
            fn from(r: $w::$name) -> Self {
                $crate::$name { $($field: $crate::__wit_field!($($kind)? r.$field)),* }
            }
        }
        impl ::core::convert::From<$crate::$name> for $w::$name {
            fn from(r: $crate::$name) -> Self {
                $w::$name { $($field: $crate::__wit_field!($($kind)? r.$field)),* }
            }
        }
    };
}

/// One field's conversion (see [`__wit_record!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_field {
    (opt $e:expr) => {
        $e.map(::core::convert::Into::into)
    };
    (vec $e:expr) => {
        $e.into_iter().map(::core::convert::Into::into).collect()
    };
    ($e:expr) => {
        ::core::convert::Into::into($e)
    };
}
