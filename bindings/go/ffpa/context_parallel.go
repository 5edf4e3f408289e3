package ffpa

// #include <ffpa/ffpa.h>
import "C"

import (
	"strconv"
	"unsafe"
)

// Sharding says how a sequence of N = P·n tokens is sharded over the P ranks
// of a context-parallel ring, n tokens each (ffpaSharding_t).
type Sharding int32

// The shardings.
const (
	// ShardingContiguous gives rank r the tokens [r·n, (r+1)·n). Under a
	// causal mask the last rank computes P times as much as the first.
	ShardingContiguous Sharding = C.FFPA_SHARDING_CONTIGUOUS
	// ShardingZigzag cuts the sequence into 2P chunks of n/2 tokens (n even)
	// and gives rank r chunk r then chunk 2P-1-r, so that every rank computes
	// the same share of a causal mask.
	ShardingZigzag Sharding = C.FFPA_SHARDING_ZIGZAG
)

// String returns "contiguous", "zigzag" or "Sharding(N)".
func (s Sharding) String() string {
	switch s {
	case ShardingContiguous:
		return "contiguous"
	case ShardingZigzag:
		return "zigzag"
	}
	return "Sharding(" + strconv.Itoa(int(s)) + ")"
}

// ContextParallelInfo is what [ContextParallel.Info] reports.
type ContextParallelInfo struct {
	Ranks    int32    // ranks of the ring
	Rank     int32    // the object's rank, 0 to Ranks-1
	Sharding Sharding // how the sequence is sharded
}

// TokenRange is the half-open range [Begin, End) of global token indices.
type TokenRange struct {
	Begin, End int64
}

// ContextParallel is one rank's place in a context-parallel ring over NCCL
// (ffpaContextParallel_t). Put it in [AttentionDesc.ContextParallel]: the
// forward and backward calls of every rank, made with descriptors of the
// rank's local shards, then compute attention over the whole sequence. Release
// it with Close; Close must not run concurrently with a call that uses it.
type ContextParallel struct {
	cp C.ffpaContextParallel_t
}

// NewContextParallel creates the context-parallel object of the calling rank
// of an NCCL communicator (ffpaCreateContextParallel). comm is the caller's
// ncclComm_t, which must belong to h's device and outlive every call that uses
// the object; the library reads its rank and size and never destroys it. The
// object owns a stream and events on h's device, so create it once. h must
// execute: a handle from [NewForDevice] gives StatusNotInitializedNoDevice. A
// library built without NCCL gives StatusNotSupported.
func (h *Handle) NewContextParallel(comm unsafe.Pointer, s Sharding) (*ContextParallel, error) {
	var cp C.ffpaContextParallel_t
	err := call(func() C.ffpaStatus_t {
		return C.ffpaCreateContextParallel(h.h, &cp, (*C.struct_ncclComm)(comm), C.ffpaSharding_t(s))
	})
	if err != nil {
		return nil, err
	}
	return &ContextParallel{cp: cp}, nil
}

// NewContextParallelForDescription creates a context-parallel object without a
// communicator for rank rank (0 to ranks-1) of ranks (1 to 65536)
// (ffpaCreateContextParallelForDescription). Its workspace sizes and plan
// descriptions are those of a real one, on any handle (also one from
// [NewForDevice]), but Forward and Backward refuse it.
func (h *Handle) NewContextParallelForDescription(ranks, rank int32, s Sharding) (*ContextParallel, error) {
	var cp C.ffpaContextParallel_t
	err := call(func() C.ffpaStatus_t {
		return C.ffpaCreateContextParallelForDescription(h.h, &cp, C.int32_t(ranks), C.int32_t(rank), C.ffpaSharding_t(s))
	})
	if err != nil {
		return nil, err
	}
	return &ContextParallel{cp: cp}, nil
}

// closedError is the error of a call on a closed *ContextParallel.
func (c *ContextParallel) closedError(what string) error {
	if c == nil || c.cp == nil {
		return &Error{Status: StatusBadParamInvalidHandle, Message: what + " was closed"}
	}
	return nil
}

// Info reports the number of ranks, the object's rank and its sharding
// (ffpaGetContextParallelInfo).
func (c *ContextParallel) Info() (ContextParallelInfo, error) {
	if err := c.closedError("the ContextParallel"); err != nil {
		return ContextParallelInfo{}, err
	}
	var ranks, rank C.int32_t
	var sharding C.ffpaSharding_t
	err := call(func() C.ffpaStatus_t { return C.ffpaGetContextParallelInfo(c.cp, &ranks, &rank, &sharding) })
	if err != nil {
		return ContextParallelInfo{}, err
	}
	return ContextParallelInfo{Ranks: int32(ranks), Rank: int32(rank), Sharding: Sharding(sharding)}, nil
}

// Shard returns the global token ranges the object's rank holds, in local
// order, when every rank holds localLength tokens
// (ffpaGetContextParallelShard): one range with ShardingContiguous, two with
// ShardingZigzag (which needs an even localLength). The rank's Q, K, V and
// outputs hold exactly these tokens, in this order.
func (c *ContextParallel) Shard(localLength int64) ([]TokenRange, error) {
	if err := c.closedError("the ContextParallel"); err != nil {
		return nil, err
	}
	var ranges [4]C.int64_t
	var count C.int32_t
	err := call(func() C.ffpaStatus_t {
		return C.ffpaGetContextParallelShard(c.cp, C.int64_t(localLength), &ranges[0], &count)
	})
	if err != nil {
		return nil, err
	}
	out := make([]TokenRange, int(count))
	for i := range out {
		out[i] = TokenRange{Begin: int64(ranges[2*i]), End: int64(ranges[2*i+1])}
	}
	return out, nil
}

// attach attaches c to a C attention descriptor, which keeps its own
// reference. It runs on the locked thread of the call building the descriptor.
func (c *ContextParallel) attach(desc C.ffpaAttentionDescriptor_t) error {
	if err := c.closedError("AttentionDesc.ContextParallel"); err != nil {
		return err
	}
	return errorOf(C.ffpaSetAttentionDescriptorContextParallel(desc, c.cp))
}

// Close destroys the object (ffpaDestroyContextParallel) without waiting for
// work already enqueued; the communicator stays the caller's. Closing twice,
// or closing a nil *ContextParallel, does nothing.
func (c *ContextParallel) Close() error {
	if c == nil || c.cp == nil {
		return nil
	}
	err := call(func() C.ffpaStatus_t { return C.ffpaDestroyContextParallel(c.cp) })
	c.cp = nil
	return err
}
