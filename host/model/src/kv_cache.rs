//! The KV cache: each layer's keys and values of the positions seen so far, in buffers with
//! room to decode into.
//!
//! Decoding copies the past as seldom as it can:
//! - a clone shares the buffers (prefix reuse is free), and a cache writes in place only at
//!   the buffers' frontier, so that no sharer sees a value change under it;
//! - a buffer that fills is copied once into one with room for half its positions again,
//!   and only what it holds is written there: the room is zeroed memory whose pages stay
//!   untouched until decoding reaches them;
//! - on the CPU, a batch row that finishes is dropped from each layer's row map instead of
//!   copied out of the buffers with the rows that go on ([`KvCache::select_rows`]): that
//!   copy of every layer, at every row that finished, was a fifth of the 1.5B's rollouts.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use candle_core::{DType, Tensor};

use crate::{error::Error, Result};

/// One layer's keys and values, `(buffer rows, kv_heads, capacity, head_dim)` each; each
/// batch row's first `len` positions are live, the rest is room to decode into without
/// copying.
#[derive(Debug, Clone)]
pub(crate) struct LayerKv {
    k: Tensor,
    v: Tensor,
    /// The buffer row that holds each batch row; `None` when batch row `i` is buffer row `i`.
    /// Buffer rows it does not name belong to retired rows, kept unread until the buffers grow.
    rows: Option<Arc<[u32]>>,
    /// How many positions of these buffers some cache has claimed. Buffers are shared by
    /// clones (prefix-cache snapshots, truncations, row selections), so a cache may only write
    /// in place at this frontier: every sharer reads positions below its own length, which
    /// never exceeds the frontier, and so never sees a value change under it.
    frontier: Arc<AtomicUsize>,
}

impl LayerKv {
    pub(crate) fn exact(k: Tensor, v: Tensor) -> Result<Self> {
        let n = k.dim(2)?;
        Ok(LayerKv { k, v, rows: None, frontier: Arc::new(AtomicUsize::new(n)) })
    }

    fn capacity(&self) -> usize {
        self.k.dims()[2]
    }

    /// How many batch rows the cache holds.
    fn batch(&self) -> usize {
        self.rows.as_ref().map_or(self.k.dims()[0], |r| r.len())
    }

    /// The buffer row of batch row `row`.
    fn buffer_row(&self, row: usize) -> usize {
        self.rows.as_ref().map_or(row, |r| r[row] as usize)
    }

    /// Identifies the buffers, which clones share.
    pub(crate) fn buffer_id(&self) -> *const AtomicUsize {
        Arc::as_ptr(&self.frontier)
    }

    /// Bytes of the key and value buffers, room and retired rows included.
    pub(crate) fn buffer_bytes(&self) -> u64 {
        ((self.k.elem_count() + self.v.elem_count()) * self.k.dtype().size_in_bytes()) as u64
    }

    /// Each batch row's first `len` positions: views of the buffers, or, under a row map, a
    /// copy of the rows it names.
    pub(crate) fn live(&self, len: usize) -> Result<(Tensor, Tensor)> {
        let Some(rows) = &self.rows else {
            return Ok((self.k.narrow(2, 0, len)?, self.v.narrow(2, 0, len)?));
        };
        let gather = |t: &Tensor| -> Result<Tensor> {
            let picked = rows.iter().map(|&r| t.narrow(0, r as usize, 1)?.narrow(2, 0, len)).collect::<candle_core::Result<Vec<_>>>()?;
            Ok(Tensor::cat(&picked, 0)?)
        };
        Ok((gather(&self.k)?, gather(&self.v)?))
    }

    /// The buffers' first `len` positions as views, every buffer row included, and the
    /// buffer row of each batch row (`None`: batch row `i` is buffer row `i`), for a reader
    /// that follows the map ([`onebrain_kernels::DecodeAttention::rows`]).
    pub(crate) fn live_in_place(&self, len: usize) -> Result<(Tensor, Tensor, Option<Arc<[u32]>>)> {
        Ok((self.k.narrow(2, 0, len)?, self.v.narrow(2, 0, len)?, self.rows.clone()))
    }

    /// Writes `k`, `v` `(b, kv_heads, q, head_dim)` at positions `len ..`: in place when
    /// this cache owns the frontier and there is room, else into new buffers with room
    /// for more (so decoding copies the past once per growth, not once per token).
    pub(crate) fn append_in_place(&mut self, len: usize, k: &Tensor, v: &Tensor) -> Result<()> {
        let q = k.dim(2)?;
        let fits = len + q <= self.capacity() && self.batch() == k.dim(0)?;
        if fits && self.frontier.compare_exchange(len, len + q, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            match &self.rows {
                None => {
                    write_at(&self.k, k, len)?;
                    write_at(&self.v, v, len)?;
                }
                Some(rows) => {
                    let pairs: Vec<(usize, usize)> = rows.iter().enumerate().map(|(i, &r)| (i, r as usize)).collect();
                    copy_rows(&self.k, k, &pairs, len)?;
                    copy_rows(&self.v, v, &pairs, len)?;
                }
            }
            return Ok(());
        }
        *self = LayerKv::with_room(Some((self, len)), k, v)?;
        Ok(())
    }

    /// New buffers holding the first `len` positions of each batch row of `past` (if any),
    /// then `k`, `v`, with room to grow; past rows the map retired are left behind.
    pub(crate) fn with_room(past: Option<(&LayerKv, usize)>, k: &Tensor, v: &Tensor) -> Result<Self> {
        let (b, h, q, d) = k.dims4()?;
        let held = past.map_or(0, |(_, n)| n);
        if let Some((p, _)) = past.filter(|(p, _)| p.batch() != b) {
            return Err(Error::meta("KV cache", format!("{b} rows of new keys for a cache of {} rows", p.batch())));
        }
        let len = held + q;
        let room = (len / 2).max(KV_MIN_ROOM);
        let (nk, nv) = (Tensor::zeros((b, h, len + room, d), k.dtype(), k.device())?, Tensor::zeros((b, h, len + room, d), v.dtype(), v.device())?);
        if let Some((p, n)) = past.filter(|&(_, n)| n > 0) {
            let pairs: Vec<(usize, usize)> = (0..b).map(|i| (p.buffer_row(i), i)).collect();
            copy_rows(&nk, &p.k.narrow(2, 0, n)?, &pairs, 0)?;
            copy_rows(&nv, &p.v.narrow(2, 0, n)?, &pairs, 0)?;
        }
        write_at(&nk, k, held)?;
        write_at(&nv, v, held)?;
        Ok(LayerKv { k: nk, v: nv, rows: None, frontier: Arc::new(AtomicUsize::new(len)) })
    }

    /// Batch rows `rows` (distinct) through a row map over the same buffers: nothing copied.
    fn mapped(&self, rows: &[u32]) -> LayerKv {
        let rows = rows.iter().map(|&r| self.buffer_row(r as usize) as u32).collect();
        LayerKv { rows: Some(rows), ..self.clone() }
    }

    /// Batch rows `rows` (a row may repeat) in buffers of their own, room kept.
    fn copied(&self, rows: &[u32], len: usize) -> Result<LayerKv> {
        let buffer_rows: Vec<u32> = rows.iter().map(|&r| self.buffer_row(r as usize) as u32).collect();
        // From the whole buffers (contiguous, as index-select needs), keeping their room.
        let idx = Tensor::new(buffer_rows.as_slice(), self.k.device())?;
        Ok(LayerKv {
            k: self.k.index_select(&idx, 0)?,
            v: self.v.index_select(&idx, 0)?,
            rows: None,
            frontier: Arc::new(AtomicUsize::new(len)),
        })
    }
}

/// Writes `src` `(b, kv_heads, q, head_dim)` into `dst`'s rows `0 .. b` at positions `at ..`.
fn write_at(dst: &Tensor, src: &Tensor, at: usize) -> Result<()> {
    if dst.dim(0)? == src.dim(0)? && src.is_contiguous() {
        return Ok(dst.slice_set(src, 2, at)?);
    }
    let pairs: Vec<(usize, usize)> = (0..src.dim(0)?).map(|i| (i, i)).collect();
    copy_rows(dst, src, &pairs, at)
}

/// Copies, for each `(from, to)`, every position of `src`'s row `from` into `dst`'s row `to`
/// at positions `at ..`, head by head: one row's head is contiguous in any buffer, whatever
/// its room or the rows around it.
fn copy_rows(dst: &Tensor, src: &Tensor, pairs: &[(usize, usize)], at: usize) -> Result<()> {
    let heads = src.dim(1)?;
    for &(from, to) in pairs {
        for h in 0..heads {
            let part = src.narrow(0, from, 1)?.narrow(1, h, 1)?;
            dst.narrow(0, to, 1)?.narrow(1, h, 1)?.slice_set(&part, 2, at)?;
        }
    }
    Ok(())
}

/// Positions a grown KV buffer has room for at least, beyond what it holds.
const KV_MIN_ROOM: usize = 256;

/// Key/value buffers of the positions seen so far, one [`LayerKv`] per layer. A clone
/// shares the buffers and costs nothing: that is what makes prefix reuse free.
#[derive(Debug, Clone, Default)]
pub(crate) struct KvCache {
    pub(crate) layers: Vec<Option<LayerKv>>,
    pub(crate) len: usize,
}

impl KvCache {
    pub(crate) fn new(n_layers: usize) -> Self {
        KvCache { layers: vec![None; n_layers], len: 0 }
    }

    /// The first `len` positions (sharing the buffers).
    pub(crate) fn truncate(&self, len: usize) -> Result<Self> {
        if len >= self.len {
            return Ok(self.clone());
        }
        let layers = if len == 0 { vec![None; self.layers.len()] } else { self.layers.clone() };
        Ok(KvCache { layers, len })
    }

    /// Rebuilds every layer from its live keys and values.
    fn map_live(&self, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Self> {
        let layers = self
            .layers
            .iter()
            .map(|l| match l {
                Some(l) => {
                    let (k, v) = l.live(self.len)?;
                    Ok(Some(LayerKv::exact(f(&k)?, f(&v)?)?))
                }
                None => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache { layers, len: self.len })
    }

    /// The cache with its live keys and values in `dtype`.
    pub(crate) fn to_dtype(&self, dtype: DType) -> Result<Self> {
        self.map_live(|t| Ok(t.to_dtype(dtype)?))
    }

    /// The cache of batch row 0 repeated `b` times.
    pub(crate) fn expand(&self, b: usize) -> Result<Self> {
        self.map_live(|t| {
            let (_, h, n, d) = t.dims4()?;
            Ok(t.narrow(0, 0, 1)?.broadcast_as((b, h, n, d))?.contiguous()?)
        })
    }

    /// This cache with its first `prefix.len` positions taken from `prefix` (the same
    /// positions computed another way, e.g. with a graph where this cache has none).
    pub(crate) fn with_prefix(&self, prefix: &KvCache) -> Result<Self> {
        let n = prefix.len.min(self.len);
        let layers = self
            .layers
            .iter()
            .zip(&prefix.layers)
            .map(|(l, p)| match (l, p) {
                (Some(l), Some(p)) if n > 0 => {
                    let (k, v) = l.live(self.len)?;
                    let (pk, pv) = p.live(prefix.len)?;
                    let join = |whole: &Tensor, front: &Tensor| -> Result<Tensor> {
                        let rest = whole.narrow(2, n, self.len - n)?;
                        Ok(Tensor::cat(&[&front.narrow(2, 0, n)?, &rest], 2)?)
                    };
                    Ok(Some(LayerKv::exact(join(&k, &pk)?, join(&v, &pv)?)?))
                }
                _ => Ok(l.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache { layers, len: self.len })
    }

    /// One batch from batch-1 caches of different lengths: part `(cache, n)` gives `n` rows,
    /// each its cache's positions followed by zeros up to `len` (slots a mask must hide).
    /// Every part holds at least one position, on every layer.
    pub(crate) fn stack_padded(parts: &[(&KvCache, usize)], len: usize) -> Result<Self> {
        let n_layers = parts.first().map_or(0, |(c, _)| c.layers.len());
        let mut layers = Vec::with_capacity(n_layers);
        for layer in 0..n_layers {
            let (mut ks, mut vs) = (Vec::with_capacity(parts.len()), Vec::with_capacity(parts.len()));
            for (cache, rows) in parts {
                let l = cache.layers[layer].as_ref().ok_or_else(|| Error::meta("KV cache", "a part has no positions".to_string()))?;
                let (k, v) = l.live(cache.len)?;
                let grow = |t: &Tensor| -> Result<Tensor> {
                    let (_, h, n, d) = t.dims4()?;
                    let t = t.narrow(0, 0, 1)?.pad_with_zeros(2, 0, len - n)?;
                    Ok(t.broadcast_as((*rows, h, len, d))?.contiguous()?)
                };
                ks.push(grow(&k)?);
                vs.push(grow(&v)?);
            }
            layers.push(Some(LayerKv::exact(Tensor::cat(&ks, 0)?, Tensor::cat(&vs, 0)?)?));
        }
        Ok(KvCache { layers, len })
    }

    /// One batch from batches of different lengths, their rows in order: part `(cache, at)`
    /// gets zeros at slots `[at, at + len - cache.len)`, its later slots moving up, so that
    /// every row holds `len` slots (the zeros are slots a mask must hide). Every part holds
    /// `at` positions or more, on every layer.
    pub(crate) fn stack_widened(parts: &[(&KvCache, usize)], len: usize) -> Result<Self> {
        let n_layers = parts.first().map_or(0, |(c, _)| c.layers.len());
        let mut layers = Vec::with_capacity(n_layers);
        for layer in 0..n_layers {
            let (mut ks, mut vs) = (Vec::with_capacity(parts.len()), Vec::with_capacity(parts.len()));
            for &(cache, at) in parts {
                let l = cache.layers[layer].as_ref().ok_or_else(|| Error::meta("KV cache", "a part has no positions".to_string()))?;
                let (k, v) = l.live(cache.len)?;
                let widen = |t: &Tensor| -> Result<Tensor> {
                    let (b, h, n, d) = t.dims4()?;
                    if n == len {
                        return Ok(t.clone());
                    }
                    let mut pieces = vec![Tensor::zeros((b, h, len - n, d), t.dtype(), t.device())?];
                    if at > 0 {
                        pieces.insert(0, t.narrow(2, 0, at)?);
                    }
                    if n > at {
                        pieces.push(t.narrow(2, at, n - at)?);
                    }
                    Ok(Tensor::cat(&pieces, 2)?)
                };
                ks.push(widen(&k)?);
                vs.push(widen(&v)?);
            }
            layers.push(Some(LayerKv::exact(Tensor::cat(&ks, 0)?, Tensor::cat(&vs, 0)?)?));
        }
        Ok(KvCache { layers, len })
    }

    /// Batch row `row`'s positions `[0, end)` less the slots `hidden` (its padding), as a
    /// batch-1 cache of its own buffers.
    pub(crate) fn row_without(&self, row: usize, hidden: std::ops::Range<usize>, end: usize) -> Result<Self> {
        let layers = self
            .layers
            .iter()
            .map(|l| match l {
                Some(l) => {
                    let pick = |t: &Tensor| -> Result<Tensor> {
                        let t = t.narrow(0, l.buffer_row(row), 1)?;
                        let mut parts = Vec::with_capacity(2);
                        if hidden.start > 0 {
                            parts.push(t.narrow(2, 0, hidden.start)?);
                        }
                        if end > hidden.end {
                            parts.push(t.narrow(2, hidden.end, end - hidden.end)?);
                        }
                        Ok(Tensor::cat(&parts, 2)?.contiguous()?)
                    };
                    Ok(Some(LayerKv::exact(pick(&l.k)?, pick(&l.v)?)?))
                }
                None => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache { layers, len: end - hidden.len() })
    }

    /// Keeps only the batch rows in `rows`, in that order. Distinct rows of an f32 cache on
    /// the CPU share the buffers through each layer's row map, nothing copied (the CPU's
    /// decode attention reads through it; a forward that does not gets a copy of the rows,
    /// [`LayerKv::live`]); rows named twice, or rows elsewhere, get buffers of their own.
    pub(crate) fn select_rows(&self, rows: &[u32]) -> Result<Self> {
        let distinct = rows.iter().enumerate().all(|(i, r)| !rows[..i].contains(r));
        let layers = self
            .layers
            .iter()
            .map(|l| match l {
                Some(l) if distinct && l.k.device().is_cpu() && l.k.dtype() == DType::F32 => Ok(Some(l.mapped(rows))),
                Some(l) => Ok(Some(l.copied(rows, self.len)?)),
                None => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache { layers, len: self.len })
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// `(rows, 2 heads, n, 4)` whose every value names its row, head, position and lane.
    fn keys(rows: usize, n: usize, from: usize, tag: f32) -> Tensor {
        let v: Vec<f32> = (0..rows * 2 * n * 4)
            .map(|i| {
                let (r, h, p, l) = (i / (2 * n * 4), i / (n * 4) % 2, i / 4 % n, i % 4);
                tag + r as f32 * 1e4 + h as f32 * 1e3 + (from + p) as f32 + l as f32 * 0.1
            })
            .collect();
        Tensor::from_vec(v, (rows, 2, n, 4), &Device::Cpu).unwrap()
    }

    fn values(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1().unwrap()
    }

    fn cache(rows: usize, n: usize) -> KvCache {
        let layer = LayerKv::with_room(None, &keys(rows, n, 0, 0.0), &keys(rows, n, 0, 0.5)).unwrap();
        KvCache { layers: vec![Some(layer), None], len: n }
    }

    fn live(c: &KvCache) -> (Vec<f32>, Vec<f32>) {
        let (k, v) = c.layers[0].as_ref().unwrap().live(c.len).unwrap();
        (values(&k), values(&v))
    }

    /// Batch rows `rows` of `cache(4, n)` after `appended` more positions written per row.
    fn expected(rows: &[usize], n: usize, appended: &[(usize, f32)]) -> Vec<f32> {
        let per_row: Vec<Tensor> = rows
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                let mut parts = vec![keys(4, n, 0, 0.0).narrow(0, r, 1).unwrap()];
                for &(m, tag) in appended {
                    parts.push(keys(rows.len(), 1, m, tag).narrow(0, i, 1).unwrap());
                }
                Tensor::cat(&parts, 2).unwrap()
            })
            .collect();
        values(&Tensor::cat(&per_row, 0).unwrap())
    }

    /// `(1, 1, n, 2)` keys whose every entry is `value`.
    fn filled(n: usize, value: f32) -> Tensor {
        Tensor::full(value, (1, 1, n, 2), &Device::Cpu).unwrap()
    }

    fn column(t: &Tensor) -> Vec<f32> {
        t.narrow(3, 0, 1).unwrap().flatten_all().unwrap().to_vec1().unwrap()
    }

    #[test]
    fn kv_appends_in_place_and_clones_never_see_a_change() {
        let mut a = LayerKv::with_room(None, &filled(3, 1.0), &filled(3, 1.0)).unwrap();
        let cap = a.capacity();
        assert!(cap >= 3 + KV_MIN_ROOM);
        // A snapshot at 3 positions, as the prefix cache keeps one.
        let mut b = a.clone();
        a.append_in_place(3, &filled(2, 2.0), &filled(2, 2.0)).unwrap();
        assert_eq!(a.capacity(), cap, "room left: written in place");
        assert_eq!(column(&a.live(5).unwrap().0), [1.0, 1.0, 1.0, 2.0, 2.0]);
        // The snapshot diverges at position 3: the frontier is past it, so it copies.
        b.append_in_place(3, &filled(1, 3.0), &filled(1, 3.0)).unwrap();
        assert_eq!(column(&b.live(4).unwrap().1), [1.0, 1.0, 1.0, 3.0]);
        assert_eq!(column(&a.live(5).unwrap().0), [1.0, 1.0, 1.0, 2.0, 2.0], "the first cache is untouched");
        // A truncation of the first cache diverging inside it copies too.
        let mut c = a.clone();
        c.append_in_place(2, &filled(1, 4.0), &filled(1, 4.0)).unwrap();
        assert_eq!(column(&c.live(3).unwrap().0), [1.0, 1.0, 4.0]);
        assert_eq!(column(&a.live(5).unwrap().0), [1.0, 1.0, 1.0, 2.0, 2.0]);
        // The first cache still owns its frontier and goes on in place.
        a.append_in_place(5, &filled(1, 5.0), &filled(1, 5.0)).unwrap();
        assert_eq!(a.capacity(), cap);
        assert_eq!(column(&a.live(6).unwrap().0), [1.0, 1.0, 1.0, 2.0, 2.0, 5.0]);
        // Past its capacity a cache grows, keeping what it holds.
        let n = cap - 6;
        a.append_in_place(6, &filled(n + 1, 6.0), &filled(n + 1, 6.0)).unwrap();
        assert!(a.capacity() > cap);
        let all = column(&a.live(cap + 1).unwrap().0);
        assert_eq!(&all[..6], [1.0, 1.0, 1.0, 2.0, 2.0, 5.0]);
        assert!(all[6..].iter().all(|&x| x == 6.0));
    }

    #[test]
    fn finished_rows_leave_the_map_and_the_others_decode_into_the_same_buffers() {
        let n = 5;
        let full = cache(4, n);
        let kept = full.select_rows(&[3, 1]).unwrap();
        let (layer, before) = (kept.layers[0].as_ref().unwrap(), full.layers[0].as_ref().unwrap());
        assert_eq!(layer.buffer_id(), before.buffer_id(), "no copy");
        assert_eq!(live(&kept).0, expected(&[3, 1], n, &[]));
        assert!(kept.layers[1].is_none());

        // A decoded position lands in the kept rows' buffer rows, in place.
        let mut kept = kept;
        let layer = kept.layers[0].as_mut().unwrap();
        layer.append_in_place(n, &keys(2, 1, n, 100.0), &keys(2, 1, n, 100.5)).unwrap();
        kept.len += 1;
        assert_eq!(kept.layers[0].as_ref().unwrap().buffer_id(), before.buffer_id());
        assert_eq!(live(&kept).0, expected(&[3, 1], n, &[(n, 100.0)]));
        // The cache it was selected from still reads its own positions as they were.
        assert_eq!(live(&full).0, expected(&[0, 1, 2, 3], n, &[]));

        // A second selection composes with the first; filling the room grows the buffers,
        // which then hold the kept rows alone, in order, values and keys alike.
        let mut one = kept.select_rows(&[1]).unwrap();
        let room = one.layers[0].as_ref().unwrap().capacity() - one.len;
        let mut appended = vec![(n, 100.0)];
        for i in 0..=room {
            let at = one.len;
            one.layers[0].as_mut().unwrap().append_in_place(at, &keys(1, 1, at, 200.0 + i as f32), &keys(1, 1, at, 200.5 + i as f32)).unwrap();
            one.len += 1;
            appended.push((at, 200.0 + i as f32));
        }
        let grown = one.layers[0].as_ref().unwrap();
        assert_ne!(grown.buffer_id(), before.buffer_id(), "grown");
        assert!(grown.rows.is_none());
        assert_eq!(grown.k.dim(0).unwrap(), 1, "the retired rows are left behind");
        let want: Vec<f32> = {
            let mut parts = vec![keys(4, n, 0, 0.0).narrow(0, 1, 1).unwrap(), keys(2, 1, n, 100.0).narrow(0, 1, 1).unwrap()];
            parts.extend(appended[1..].iter().map(|&(at, tag)| keys(1, 1, at, tag)));
            values(&Tensor::cat(&parts, 2).unwrap())
        };
        assert_eq!(live(&one).0, want);
        let want_v: Vec<f32> = {
            let mut parts = vec![keys(4, n, 0, 0.5).narrow(0, 1, 1).unwrap(), keys(2, 1, n, 100.5).narrow(0, 1, 1).unwrap()];
            parts.extend(appended[1..].iter().map(|&(at, tag)| keys(1, 1, at, tag + 0.5)));
            values(&Tensor::cat(&parts, 2).unwrap())
        };
        assert_eq!(live(&one).1, want_v);
    }

    #[test]
    fn copies_of_a_row_get_buffers_of_their_own() {
        let n = 3;
        let full = cache(2, n);
        let mut copies = full.select_rows(&[1, 1, 0]).unwrap();
        assert_ne!(copies.layers[0].as_ref().unwrap().buffer_id(), full.layers[0].as_ref().unwrap().buffer_id());
        assert_eq!(live(&copies).0, expected(&[1, 1, 0], n, &[]));
        copies.layers[0].as_mut().unwrap().append_in_place(n, &keys(3, 1, n, 50.0), &keys(3, 1, n, 50.5)).unwrap();
        copies.len += 1;
        assert_eq!(live(&copies).0, expected(&[1, 1, 0], n, &[(n, 50.0)]));
        assert_eq!(live(&full).0, expected(&[0, 1], n, &[]));
    }

    #[test]
    fn new_keys_for_another_number_of_rows_are_refused() {
        let c = cache(3, 2).select_rows(&[0, 2]).unwrap();
        let mut layer = c.layers[0].clone().unwrap();
        let capacity = layer.capacity();
        // Past the room, with 3 rows of keys for a cache of 2.
        let err = layer.append_in_place(capacity, &keys(3, 1, 0, 0.0), &keys(3, 1, 0, 0.0)).unwrap_err();
        assert!(err.to_string().contains("3 rows of new keys for a cache of 2 rows"), "{err}");
    }
}
