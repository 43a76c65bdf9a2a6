//! One live instance of a plugin and the discipline of a call: fresh limits
//! for every call, a typed error for every failure, and a fresh store after
//! any failure that is not the guest's own error report.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use wasmtime::component::InstancePre;
use wasmtime::{Store, Trap};

use crate::error::{PluginError, PluginErrorKind};
use crate::host::{LoadedPlugin, PluginShared};
use crate::limits::{OutputSize, EPOCH_TICK};
use crate::manifest::World;
use crate::state::StoreState;

/// The generated bindings of one world.
pub(crate) trait WorldBindings: Sized + Send + 'static {
    /// The world these bindings serve.
    const WORLD: World;
    /// The pre-instantiated form (export indices resolved once).
    type Pre: Clone + Send + Sync + 'static;
    /// Resolves the world's exports; fails when the component lacks one.
    fn pre(pre: InstancePre<StoreState>) -> wasmtime::Result<Self::Pre>;
    /// Instantiates into `store`.
    fn instantiate(pre: &Self::Pre, store: &mut Store<StoreState>) -> wasmtime::Result<Self>;
}

/// The text of wasmtime's error when lifting a result runs past the store's
/// hostcall fuel (its type is private, so the text is what identifies it;
/// `hostile.rs` fails if a wasmtime upgrade changes it).
const HOSTCALL_FUEL_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";

/// Whether the host keeps an instance between calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstancePolicy {
    /// Keep the instance while calls succeed (≈ µs per call); start a fresh
    /// one after any failure.
    #[default]
    Reuse,
    /// A fresh store and instance for every call: no state survives between
    /// calls, at tens of µs each.
    FreshPerCall,
}

struct Live<W> {
    store: Store<StoreState>,
    bindings: W,
}

/// What one call took and the limits it ran under: what a budget is sized from.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct CallCost {
    /// Fuel the call consumed (instantiation excluded).
    pub fuel: u64,
    /// The fuel it was given.
    pub fuel_limit: u64,
    /// The wall clock it was given, in milliseconds.
    pub timeout_ms: u64,
    /// The wall clock it took, in milliseconds.
    pub wall_ms: f64,
}

/// A plugin's callable instance for world `W`.
pub(crate) struct Slot<W: WorldBindings> {
    shared: Arc<PluginShared>,
    pre: W::Pre,
    policy: InstancePolicy,
    live: Mutex<Option<Live<W>>>,
    last: Mutex<Option<CallCost>>,
}

impl<W: WorldBindings> Slot<W> {
    pub(crate) fn new(plugin: &LoadedPlugin, policy: InstancePolicy) -> Result<Self, PluginError> {
        if plugin.manifest.world != W::WORLD {
            return Err(PluginError::new(
                plugin.id(),
                PluginErrorKind::WorldMismatch {
                    world: W::WORLD.to_string(),
                    reason: format!("its manifest says `{}`", plugin.manifest.world),
                },
            ));
        }
        let pre = W::pre(plugin.pre.clone()).map_err(|e| {
            PluginError::new(
                plugin.id(),
                PluginErrorKind::WorldMismatch { world: W::WORLD.to_string(), reason: format!("{e:#}") },
            )
        })?;
        Ok(Slot { shared: plugin.shared.clone(), pre, policy, live: Mutex::new(None), last: Mutex::new(None) })
    }

    /// The plugin's limits.
    pub(crate) fn limits(&self) -> &crate::Limits {
        &self.shared.limits
    }

    /// What the last call took, once one has run.
    pub(crate) fn last_call(&self) -> Option<CallCost> {
        *self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The plugin's verified name (its manifest's and its folder's).
    pub(crate) fn name(&self) -> &str {
        &self.shared.id.name
    }

    fn fail(&self, kind: PluginErrorKind) -> PluginError {
        PluginError::with_limits(&self.shared.id, kind, &self.shared.limits)
    }

    fn fresh(&self) -> Result<Live<W>, PluginError> {
        let limits = &self.shared.limits;
        let state = StoreState::new(limits.memory_bytes(), limits.stderr_bytes(), &self.shared.preopens)
            .map_err(|e| self.fail(PluginErrorKind::Runtime(format!("{e:#}"))))?;
        let mut store = Store::new(self.shared.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Instantiation runs the guest's start code: give it the same limits as a call.
        self.arm(&mut store, limits)?;
        let bindings = W::instantiate(&self.pre, &mut store).map_err(|e| {
            let kind = self.classify(e, &mut store, limits);
            self.fail(kind)
        })?;
        Ok(Live { store, bindings })
    }

    fn arm(&self, store: &mut Store<StoreState>, limits: &crate::Limits) -> Result<(), PluginError> {
        store.data_mut().limiter.hit = false;
        store.data_mut().deadline = Some(Instant::now() + limits.timeout());
        store.set_fuel(limits.fuel).map_err(|e| self.fail(PluginErrorKind::Runtime(format!("{e:#}"))))?;
        // Ticks until the deadline, rounded up, plus one for the tick in progress.
        let ticks = limits.timeout_ms.div_ceil(EPOCH_TICK.as_millis() as u64) + 1;
        store.set_epoch_deadline(ticks);
        // What wasmtime may copy out of the guest for this call: the output
        // cap is then enforced while the answer is lifted, not after a copy
        // of up to 128 MiB (wasmtime's default).
        store.set_hostcall_fuel(limits.copy_bytes());
        Ok(())
    }

    /// Calls into the guest with fresh limits, then checks the answer: its
    /// size against the output cap and its value with `check` (the world's
    /// validator, `validate.rs`). A guest error keeps the instance; every
    /// other failure drops it.
    pub(crate) fn call<R: OutputSize, T>(
        &self,
        f: impl FnOnce(&W, &mut Store<StoreState>) -> wasmtime::Result<Result<R, String>>,
        check: impl FnOnce(R) -> Result<T, PluginErrorKind>,
    ) -> Result<T, PluginError> {
        self.call_with(&self.shared.limits, f, check)
    }

    /// [`Slot::call`] under `limits` for this call alone (a budget sized to the task).
    pub(crate) fn call_with<R: OutputSize, T>(
        &self,
        limits: &crate::Limits,
        f: impl FnOnce(&W, &mut Store<StoreState>) -> wasmtime::Result<Result<R, String>>,
        check: impl FnOnce(R) -> Result<T, PluginErrorKind>,
    ) -> Result<T, PluginError> {
        let mut guard = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() || self.policy == InstancePolicy::FreshPerCall {
            *guard = Some(self.fresh()?);
        }
        let live = guard.as_mut().expect("just filled");
        self.arm(&mut live.store, limits)?;
        let _ = live.store.data().output.take();
        let started = Instant::now();
        let outcome = f(&live.bindings, &mut live.store);
        let cost = CallCost {
            fuel: limits.fuel.saturating_sub(live.store.get_fuel().unwrap_or(0)),
            fuel_limit: limits.fuel,
            timeout_ms: limits.timeout_ms,
            wall_ms: started.elapsed().as_secs_f64() * 1e3,
        };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(cost);
        // An answer after the deadline is a timeout too: a guest blocked in
        // the host (a clamped sleep, see clocks.rs) resumes and may return
        // before the next epoch check fires.
        let late = live.store.data().deadline.is_some_and(|d| Instant::now() > d);
        let outcome = match outcome {
            Ok(_) if late => Err(wasmtime::Error::new(Trap::Interrupt)),
            other => other,
        };
        let limit = limits.max_output_bytes();
        let kind = match outcome {
            Ok(Ok(value)) => {
                let bytes = value.output_size();
                if bytes > limit {
                    PluginErrorKind::OutputTooLarge { bytes: Some(bytes), limit }
                } else {
                    match check(value) {
                        Ok(v) => return Ok(v),
                        Err(kind) => kind,
                    }
                }
            }
            // The guest's own error: kept (escaped, capped) when within the output cap.
            Ok(Err(message)) if message.len() <= limit => return Err(self.fail(PluginErrorKind::Guest(message))),
            Ok(Err(message)) => PluginErrorKind::OutputTooLarge { bytes: Some(message.len()), limit },
            Err(e) => self.classify(e, &mut live.store, limits),
        };
        // The store may be poisoned (after a trap), bloated or in the hands
        // of a guest that lies: never reuse it.
        *guard = None;
        Err(self.fail(kind))
    }

    fn classify(&self, e: wasmtime::Error, store: &mut Store<StoreState>, limits: &crate::Limits) -> PluginErrorKind {
        let stderr = store.data().output.take();
        let kind = if store.data().limiter.hit {
            PluginErrorKind::MemoryLimit { limit_bytes: limits.memory_bytes() }
        } else if format!("{e:#}").contains(HOSTCALL_FUEL_EXHAUSTED) {
            PluginErrorKind::OutputTooLarge { bytes: None, limit: limits.max_output_bytes() }
        } else if let Some(trap) = e.downcast_ref::<Trap>() {
            match trap {
                Trap::Interrupt => PluginErrorKind::Timeout { limit: limits.timeout() },
                Trap::OutOfFuel => PluginErrorKind::FuelExhausted { fuel: limits.fuel },
                Trap::StackOverflow => PluginErrorKind::StackOverflow,
                other => PluginErrorKind::Trap { trap: other.to_string(), stderr },
            }
        } else {
            PluginErrorKind::Runtime(format!("{e:#}"))
        };
        kind
    }
}
