//! Guest sleeps that cannot outlive the call's deadline.
//!
//! Epoch interruption only fires while the guest runs WebAssembly; a guest
//! blocked in `wasi:clocks` (`std::thread::sleep(1 hour)`) sits in host code
//! where no epoch check happens. So the host shadows the monotonic clock's
//! `subscribe-*` functions: a sleep ends at the call's deadline at the
//! latest, the guest resumes, and the next epoch check turns it into a
//! timeout. `now` is shadowed too, so instants and durations share one origin.

use std::time::{Duration, Instant};

use wasmtime::component::{Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi::p2::{subscribe, DynPollable, Pollable};

use crate::limits::EPOCH_TICK;
use crate::state::StoreState;

/// The monotonic-clock interface as wasmtime-wasi 48 registers it.
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

struct Sleep(tokio::time::Instant);

#[wasmtime_wasi::async_trait]
impl Pollable for Sleep {
    async fn ready(&mut self) {
        tokio::time::sleep_until(self.0).await;
    }
}

fn sleep_for(mut store: StoreContextMut<'_, StoreState>, wanted: Duration) -> wasmtime::Result<Resource<DynPollable>> {
    let now = Instant::now();
    let mut until = now.checked_add(wanted).unwrap_or(now + Duration::from_secs(86_400));
    if let Some(deadline) = store.data().deadline {
        // One tick past the deadline, so the epoch has certainly moved on.
        until = until.min(deadline + EPOCH_TICK);
    }
    let table = store.data_mut().table();
    let sleep = table.push(Sleep(tokio::time::Instant::from_std(until)))?;
    subscribe(table, sleep)
}

/// Adds the shadowing definitions to `linker` (after WASI's own).
pub(crate) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap("now", |store: StoreContextMut<'_, StoreState>, (): ()| {
        Ok((store.data().clock_origin.elapsed().as_nanos() as u64,))
    })?;
    clock.func_wrap("subscribe-duration", |store: StoreContextMut<'_, StoreState>, (ns,): (u64,)| {
        Ok((sleep_for(store, Duration::from_nanos(ns))?,))
    })?;
    clock.func_wrap("subscribe-instant", |store: StoreContextMut<'_, StoreState>, (when,): (u64,)| {
        let now = store.data().clock_origin.elapsed().as_nanos() as u64;
        Ok((sleep_for(store, Duration::from_nanos(when.saturating_sub(now)))?,))
    })?;
    linker.allow_shadowing(false);
    Ok(())
}
