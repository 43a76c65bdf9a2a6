//! Plugin host: sandboxed WebAssembly components (wasmtime) behind the onebrain:plugin WIT worlds.
#![deny(missing_docs)]
