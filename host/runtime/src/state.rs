//! The state of one store: the guest's WASI context (empty by default), its
//! resource table, its limiter and what it printed.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::grants::Preopen;
use crate::limits::StoreLimiter;

/// One store's state (wasmtime's `ComponentRunStates`, Zed's `WasmState`).
pub(crate) struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: StoreLimiter,
    pub(crate) output: CappedPipe,
    /// When the current call must end (set for each call).
    pub(crate) deadline: Option<std::time::Instant>,
    /// The origin of the guest's monotonic clock.
    pub(crate) clock_origin: std::time::Instant,
}

impl StoreState {
    /// The default sandbox: no environment, no arguments, no stdin, no
    /// network (wasmtime-wasi's defaults deny TCP, UDP and name lookup), no
    /// directories except the read-only `preopens` the granter allowed;
    /// stdout and stderr go to one capped buffer.
    pub(crate) fn new(memory_bytes: u64, output_cap: usize, preopens: &[Preopen]) -> wasmtime::Result<Self> {
        let output = CappedPipe::new(output_cap);
        let mut b = WasiCtxBuilder::new();
        // We call guests synchronously: let file reads run on this thread
        // instead of a hop through tokio's blocking pool (which costs
        // milliseconds per call and counts against the guest's deadline).
        b.allow_blocking_current_thread(true);
        b.stdout(output.clone()).stderr(output.clone());
        for p in preopens {
            b.preopened_dir(&p.host, &p.guest, FsPerms::ReadOnly)?;
        }
        Ok(StoreState {
            wasi: b.build(),
            table: ResourceTable::new(),
            limiter: StoreLimiter::new(memory_bytes),
            output,
            deadline: None,
            clock_origin: std::time::Instant::now(),
        })
    }

    pub(crate) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// The guest's stdout and stderr: keeps the first `cap` bytes and silently
/// drops the rest. (wasmtime's `MemoryOutputPipe` reports "closed" when full,
/// which makes Rust's `eprintln!` panic: a chatty guest would trap.)
#[derive(Clone)]
pub(crate) struct CappedPipe {
    inner: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    cap: usize,
    dropped: usize,
}

impl CappedPipe {
    pub(crate) fn new(cap: usize) -> Self {
        CappedPipe { inner: Arc::new(Mutex::new(Captured { bytes: Vec::new(), cap, dropped: 0 })) }
    }

    fn push(&self, data: &[u8]) {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = c.cap.saturating_sub(c.bytes.len());
        let take = room.min(data.len());
        c.bytes.extend_from_slice(&data[..take]);
        c.dropped += data.len() - take;
    }

    /// Takes what was captured since the last call, as lossy UTF-8.
    pub(crate) fn take(&self) -> String {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut s = String::from_utf8_lossy(&c.bytes).into_owned();
        if c.dropped > 0 {
            s.push_str(&format!("… [{} more bytes dropped]", c.dropped));
        }
        c.bytes.clear();
        c.dropped = 0;
        s
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always ready: whatever does not fit is dropped, never refused.
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_pipe_keeps_the_head_and_counts_the_rest() {
        let mut p = CappedPipe::new(4);
        OutputStream::write(&mut p, bytes::Bytes::from_static(b"abcdef")).unwrap();
        assert_eq!(p.check_write().unwrap(), 64 * 1024);
        assert_eq!(p.take(), "abcd… [2 more bytes dropped]");
        assert_eq!(p.take(), "");
    }
}
