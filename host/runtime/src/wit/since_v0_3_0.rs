//! Bindings for `onebrain:plugin@0.3.0` (`wit/since_v0.3.0`), kept so diagnostic parsers
//! built against it (or 0.1.0 or 0.2.0, the same world) still load: 0.4.0 gave the
//! diagnostic-parser world a second export, `review`, so a 0.3.0 parser is another component
//! type. It has `parse` only, and is called as it always was. The other worlds of 0.3.0 are
//! the same component type as 0.4.0's (a test in `wit/mod.rs` holds their WIT equal), so
//! [`super::latest`]'s bindings serve them.

use onebrain_core as core;

/// `world diagnostic-parser`, with `parse` alone.
pub(crate) mod diagnostic_parser {
    wasmtime::component::bindgen!({ path: "../../wit/since_v0.3.0", world: "diagnostic-parser" });
}

use diagnostic_parser::onebrain::plugin::types as w;

/// Maps an enum onto its twin case by case.
macro_rules! map_enum {
    ($v:expr, $from:path => $to:path, [$($case:ident),* $(,)?]) => {{
        use $from as F;
        use $to as T;
        match $v { $(F::$case => T::$case,)* }
    }};
}

pub(crate) fn solver_output(o: &core::SolverOutput) -> w::SolverOutput {
    w::SolverOutput { exit_code: o.exit_code, stdout: o.stdout.clone(), stderr: o.stderr.clone(), timed_out: o.timed_out }
}

pub(crate) fn to_wit(d: &core::Diagnostic) -> w::Diagnostic {
    w::Diagnostic {
        category: map_enum!(d.category, core::Category => w::Category,
            [Syntax, ObjectType, PredicateSchema, PreconditionEffect, GoalConstraint, Unreachable, SolverError]),
        severity: map_enum!(d.severity, core::Severity => w::Severity, [Error, Warning]),
        message: d.message.clone(),
        file: d.file.map(|f| map_enum!(f, core::SpecFile => w::SpecFile, [Domain, Problem, Plan])),
        line: d.line,
        column: d.column,
    }
}

pub(crate) fn from_wit(d: w::Diagnostic) -> core::Diagnostic {
    core::Diagnostic {
        category: map_enum!(d.category, w::Category => core::Category,
            [Syntax, ObjectType, PredicateSchema, PreconditionEffect, GoalConstraint, Unreachable, SolverError]),
        severity: map_enum!(d.severity, w::Severity => core::Severity, [Error, Warning]),
        message: d.message,
        file: d.file.map(|f| map_enum!(f, w::SpecFile => core::SpecFile, [Domain, Problem, Plan])),
        line: d.line,
        column: d.column,
    }
}

impl crate::limits::OutputSize for w::Diagnostic {
    fn output_size(&self) -> usize {
        self.message.len() + 16
    }
}
