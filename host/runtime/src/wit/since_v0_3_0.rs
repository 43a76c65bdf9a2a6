//! Bindings for `onebrain:plugin@0.3.0` (`wit/since_v0.3.0`), kept so diagnostic parsers
//! built against it (or 0.1.0 or 0.2.0, the same world) still load: 0.4.0 gave the
//! diagnostic-parser world a second export, `review`, so a 0.3.0 parser is another component
//! type. It has `parse` only, and is called as it always was. The other worlds of 0.3.0 are
//! the same component type as 0.4.0's (a test in `wit/mod.rs` holds their WIT equal), so
//! [`super::latest`]'s bindings serve them.

/// `world diagnostic-parser`, with `parse` alone.
pub(crate) mod diagnostic_parser {
    wasmtime::component::bindgen!({ path: "../../wit/since_v0.3.0", world: "diagnostic-parser" });
}

pub(crate) use diagnostic_parser::onebrain::plugin::types as w;

onebrain_core::wit_conversions!(w);

impl crate::limits::OutputSize for w::Diagnostic {
    fn output_size(&self) -> usize {
        self.message.len() + 16
    }
}
