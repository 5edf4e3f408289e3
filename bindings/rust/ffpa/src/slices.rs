//! Attention slices: packed variable-length batches and flexible masks (the `slices` group of
//! `ffpa.h`).

use std::ptr::{self, NonNull};

use crate::attention::AttentionDesc;
use crate::error::{check, Error, Result, Status};
use crate::handle::Handle;
use crate::sys;
use crate::types::SliceMask;

/// The most slices one list holds (`FFPA_MAX_SLICES`).
pub const MAX_SLICES: usize = sys::FFPA_MAX_SLICES as usize;

/// One slice: queries `[q0, q1)` see keys `[k0, k1)` under `mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// First query row.
    pub q0: i32,
    /// One past the last query row.
    pub q1: i32,
    /// First key.
    pub k0: i32,
    /// One past the last key.
    pub k1: i32,
    /// How the slice's keys are masked.
    pub mask: SliceMask,
}

/// What [`AttentionSlices::info`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlicesInfo {
    /// Number of slices.
    pub count: i32,
    /// One past the last query row a slice covers: Nq must be at least this.
    pub query_extent: i64,
    /// One past the last key a slice covers: Nkv must be at least this.
    pub key_extent: i64,
    /// (query, key) pairs that attend, per batch entry and head.
    pub visible_pairs: i64,
}

/// A checked list of attention slices, copied to the device of the handle it was made with
/// (`ffpaAttentionSlices_t`). Attach it to an [`AttentionDesc`] with
/// [`AttentionDesc::set_slices`]; the descriptor keeps the list it was given.
pub struct AttentionSlices {
    raw: NonNull<sys::ffpaSlicesStruct>,
}

// The setters take `&mut self`; the library keeps no thread affinity for lists.
unsafe impl Send for AttentionSlices {}
unsafe impl Sync for AttentionSlices {}

impl AttentionSlices {
    /// An empty list for the device of `handle` (a described device's lists plan but do not run).
    pub fn new(handle: &Handle) -> Result<AttentionSlices> {
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid place for the new list; the handle is live.
        check(unsafe { sys::ffpaCreateAttentionSlices(handle.as_raw(), &mut raw) })?;
        NonNull::new(raw).map(|raw| AttentionSlices { raw }).ok_or_else(|| {
            Error::new(Status::INTERNAL_ERROR, "AttentionSlices: the library gave no list")
        })
    }

    /// Sets the slices (`ffpaSetAttentionSlices`): checked, a key given twice to a row refused,
    /// then copied to the device. On failure the list keeps its previous slices.
    pub fn set(&mut self, slices: &[Slice]) -> Result<()> {
        let queries: Vec<i32> = slices.iter().flat_map(|s| [s.q0, s.q1]).collect();
        let keys: Vec<i32> = slices.iter().flat_map(|s| [s.k0, s.k1]).collect();
        let masks: Vec<i32> = slices.iter().map(|s| s.mask.to_c().0 as i32).collect();
        let count = slices.len().min(i32::MAX as usize) as i32;
        // SAFETY: the arrays hold `count` pairs and masks; the list is live.
        check(unsafe {
            sys::ffpaSetAttentionSlices(
                self.as_raw(),
                count,
                queries.as_ptr(),
                keys.as_ptr(),
                masks.as_ptr(),
            )
        })
    }

    /// One slice per sequence of a packed batch from cumulative offsets (`cu_seqlens`, from 0;
    /// `ffpaSetAttentionSlicesFromOffsets`); `key_offsets` `None` uses the query offsets.
    pub fn set_from_offsets(
        &mut self,
        query_offsets: &[i32],
        key_offsets: Option<&[i32]>,
        mask: SliceMask,
    ) -> Result<()> {
        if let Some(keys) = key_offsets {
            if keys.len() != query_offsets.len() {
                return Err(Error::new(
                    Status::BAD_PARAM_SHAPE_MISMATCH,
                    format!("{} query offsets but {} key offsets", query_offsets.len(), keys.len()),
                ));
            }
        }
        let sequences = query_offsets.len().saturating_sub(1).min(i32::MAX as usize) as i32;
        // SAFETY: each array holds `sequences + 1` offsets (the library reads none when
        // `sequences` is 0, which it refuses); the list is live.
        check(unsafe {
            sys::ffpaSetAttentionSlicesFromOffsets(
                self.as_raw(),
                sequences,
                query_offsets.as_ptr(),
                key_offsets.map_or(ptr::null(), <[i32]>::as_ptr),
                mask.to_c(),
            )
        })
    }

    /// The slice count, extents and visible pairs (`ffpaGetAttentionSlicesInfo`).
    pub fn info(&self) -> Result<SlicesInfo> {
        let mut info = SlicesInfo { count: 0, query_extent: 0, key_extent: 0, visible_pairs: 0 };
        // SAFETY: every output points to a writable value of its type.
        check(unsafe {
            sys::ffpaGetAttentionSlicesInfo(
                self.as_raw(),
                &mut info.count,
                &mut info.query_extent,
                &mut info.key_extent,
                &mut info.visible_pairs,
            )
        })?;
        Ok(info)
    }

    /// The C list, for calls these bindings do not wrap. It stays owned by `self`.
    pub fn as_raw(&self) -> sys::ffpaAttentionSlices_t {
        self.raw.as_ptr()
    }
}

impl Drop for AttentionSlices {
    fn drop(&mut self) {
        // SAFETY: the list is live and no borrow of it remains.
        unsafe { sys::ffpaDestroyAttentionSlices(self.as_raw()) };
    }
}

impl AttentionDesc {
    /// Attaches the current slices of `slices` as the mask (the causal mode must then be
    /// [`CausalMode::None`](crate::CausalMode::None)), or detaches them with `None`
    /// (`ffpaSetAttentionDescriptorSlices`). The descriptor keeps what it was given.
    pub fn set_slices(&mut self, slices: Option<&AttentionSlices>) -> Result<()> {
        // SAFETY: both objects are live.
        check(unsafe {
            sys::ffpaSetAttentionDescriptorSlices(
                self.as_raw(),
                slices.map_or(ptr::null_mut(), AttentionSlices::as_raw),
            )
        })
    }
}
