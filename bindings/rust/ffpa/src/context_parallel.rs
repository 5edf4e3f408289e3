//! Context parallelism: one sequence sharded over the ranks of an NCCL communicator (the
//! `context_parallel` group of `ffpa.h`).

use std::fmt;
use std::ops::Range;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};

use crate::attention::AttentionDesc;
use crate::error::{check, Error, Result, Status};
use crate::handle::Handle;
use crate::sys;
use crate::types::Sharding;

/// What [`ContextParallel::info`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextParallelInfo {
    /// Number of ranks of the ring.
    pub ranks: i32,
    /// The object's rank, from 0 to `ranks - 1`.
    pub rank: i32,
    /// How the sequence is sharded over the ranks.
    pub sharding: Sharding,
}

/// One rank's place in a context-parallel ring, and its exchange stream
/// (`ffpaContextParallel_t`). Destroyed when dropped.
///
/// Attached to an [`AttentionDesc`] with [`AttentionDesc::set_context_parallel`], it makes
/// [`Handle::forward`] and [`Handle::backward`] on every rank, given descriptors of the rank's
/// **local** shards (`[B, H, n, D]`), compute attention over the **whole** sequence of
/// `N = ranks * n` tokens: key/value blocks travel a ring over NCCL while each rank computes its
/// queries against the block it holds. The descriptor's causal mode is the mask over the whole
/// sequence. [`shard`](ContextParallel::shard) says which tokens of it a rank holds.
///
/// Every rank must make the same calls with the same shapes in the same order, as with any NCCL
/// collective. Attention slices on the same descriptor mask the whole sequence: their rows and
/// keys are global token positions (up to `ranks * n`).
pub struct ContextParallel {
    raw: NonNull<sys::ffpaContextParallelStruct>,
}

// The header lets its functions be used from several threads at once; the object is never
// modified after its creation, and `Drop` needs it unborrowed.
unsafe impl Send for ContextParallel {}
unsafe impl Sync for ContextParallel {}

impl ContextParallel {
    /// The object for the calling rank of an NCCL communicator (`ffpaCreateContextParallel`).
    ///
    /// Reads the rank and the number of ranks from `comm`, and creates a stream and four events
    /// on the handle's device (so it allocates: do it once). `handle` must execute (not be made
    /// with [`Handle::for_device`], which gives [`Status::NOT_INITIALIZED_NO_DEVICE`]). A library
    /// built without NCCL fails with [`Status::NOT_SUPPORTED`]; a null `comm` with
    /// [`Status::BAD_PARAM_NULL_POINTER`].
    ///
    /// # Safety
    /// `comm` is null or the caller's live `ncclComm_t` (a `struct ncclComm*`, for instance from
    /// `ncclCommInitRank`) of the handle's device. It must stay alive (not be destroyed or
    /// aborted) until the last forward or backward that uses this object has finished on the
    /// GPU, including those of descriptors it was attached to (they keep the object after it is
    /// dropped). libffpa never destroys the communicator, and the caller enqueues no other NCCL
    /// work on it that could interleave with the ring's.
    pub unsafe fn new(
        handle: &Handle,
        comm: *mut c_void,
        sharding: Sharding,
    ) -> Result<ContextParallel> {
        let mut raw = ptr::null_mut();
        check(sys::ffpaCreateContextParallel(
            handle.as_raw(),
            &mut raw,
            comm.cast::<sys::ncclComm>(),
            sharding.to_c(),
        ))?;
        ContextParallel::from_created(raw)
    }

    /// An object for rank `rank` of `ranks` without a communicator
    /// (`ffpaCreateContextParallelForDescription`), on any handle, also one made with
    /// [`Handle::for_device`]. Its workspace sizes and plan descriptions are those of a real one,
    /// but [`Handle::forward`] and [`Handle::backward`] refuse it.
    ///
    /// `ranks` is from 1 to 65536, `rank` from 0 to `ranks - 1`
    /// ([`Status::BAD_PARAM_OUT_OF_BOUND`] otherwise).
    pub fn for_description(
        handle: &Handle,
        ranks: i32,
        rank: i32,
        sharding: Sharding,
    ) -> Result<ContextParallel> {
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid place for the new object; the handle is live.
        check(unsafe {
            sys::ffpaCreateContextParallelForDescription(
                handle.as_raw(),
                &mut raw,
                ranks,
                rank,
                sharding.to_c(),
            )
        })?;
        ContextParallel::from_created(raw)
    }

    fn from_created(raw: sys::ffpaContextParallel_t) -> Result<ContextParallel> {
        NonNull::new(raw).map(|raw| ContextParallel { raw }).ok_or_else(|| {
            Error::new(Status::INTERNAL_ERROR, "ContextParallel: the library gave no object")
        })
    }

    /// The number of ranks, this object's rank and the sharding (`ffpaGetContextParallelInfo`).
    pub fn info(&self) -> Result<ContextParallelInfo> {
        let (mut ranks, mut rank) = (0i32, 0i32);
        let mut sharding = sys::ffpaSharding_t::FFPA_SHARDING_CONTIGUOUS;
        // SAFETY: every output points to a writable value of its type; the object is live.
        check(unsafe {
            sys::ffpaGetContextParallelInfo(self.as_raw(), &mut ranks, &mut rank, &mut sharding)
        })?;
        Ok(ContextParallelInfo { ranks, rank, sharding: Sharding::from_c(sharding)? })
    }

    /// The tokens of the whole sequence this rank holds, in local order, as half-open ranges of
    /// global token indices (`ffpaGetContextParallelShard`): one range with
    /// [`Sharding::Contiguous`], two with [`Sharding::Zigzag`].
    ///
    /// `local_length` is the number of tokens per rank, at least 1
    /// ([`Status::BAD_PARAM_OUT_OF_BOUND`]) and even for zigzag sharding
    /// ([`Status::BAD_PARAM_SHAPE_MISMATCH`]).
    pub fn shard(&self, local_length: i64) -> Result<Vec<Range<i64>>> {
        let mut ranges = [0i64; 4];
        let mut count = 0i32;
        // SAFETY: `ranges` has room for the 4 values the library may write; the object is live.
        check(unsafe {
            sys::ffpaGetContextParallelShard(
                self.as_raw(),
                local_length,
                ranges.as_mut_ptr(),
                &mut count,
            )
        })?;
        let count = count.clamp(0, 2) as usize;
        Ok(ranges[..2 * count].chunks_exact(2).map(|r| r[0]..r[1]).collect())
    }

    /// The C object, for calls these bindings do not wrap. It stays owned by `self`.
    pub fn as_raw(&self) -> sys::ffpaContextParallel_t {
        self.raw.as_ptr()
    }
}

impl Drop for ContextParallel {
    fn drop(&mut self) {
        // SAFETY: the object is live and no borrow of it remains. Descriptors it is attached to
        // keep what they need; enqueued work is not waited for.
        unsafe { sys::ffpaDestroyContextParallel(self.as_raw()) };
    }
}

impl fmt::Debug for ContextParallel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.info().ok();
        f.debug_struct("ContextParallel")
            .field("ranks", &info.map(|i| i.ranks))
            .field("rank", &info.map(|i| i.rank))
            .field("sharding", &info.map(|i| i.sharding))
            .finish()
    }
}

impl AttentionDesc {
    /// Attaches a context-parallel object, making the descriptor's calls those of one rank of
    /// its ring (their tensor descriptors then describe the rank's local shards), or detaches it
    /// with `None` (`ffpaSetAttentionDescriptorContextParallel`). The descriptor keeps its own
    /// reference: it stays usable after `cp` is dropped.
    pub fn set_context_parallel(&mut self, cp: Option<&ContextParallel>) -> Result<()> {
        // SAFETY: both objects are live.
        check(unsafe {
            sys::ffpaSetAttentionDescriptorContextParallel(
                self.as_raw(),
                cp.map_or(ptr::null_mut(), ContextParallel::as_raw),
            )
        })
    }
}
