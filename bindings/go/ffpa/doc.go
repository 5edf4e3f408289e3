// Package ffpa binds libffpa, fast scaled dot-product attention for large head
// dimensions on NVIDIA GPUs, through cgo.
//
// The package follows the C interface (include/ffpa/ffpa.h) closely: a [Handle]
// bound to one device, typed policy knobs, tensor and attention descriptions,
// workspace-size queries and the [Handle.Forward] and [Handle.Backward] calls.
// It has no dependency besides libffpa, which it finds with pkg-config:
//
//	PKG_CONFIG_PATH=/usr/local/lib/x86_64-linux-gnu/pkgconfig go build ./...
//
// # Errors
//
// Every call that can fail returns an [*Error] carrying the library's status
// code and its detailed message, which names the argument at fault and the
// allowed values. The message is thread-local in C; the package reads it on the
// same OS thread as the failing call.
//
// # Device memory
//
// The package allocates no device memory. Tensors, the workspace and the
// log-sum-exp are device addresses ([DevicePtr]) obtained from the caller's
// CUDA allocator (cudaMalloc, a memory pool, another binding). The caller keeps
// them allocated until the work enqueued on the handle's stream has finished:
// Forward and Backward only enqueue and return. A DevicePtr is an integer, not
// an unsafe.Pointer, because it does not point into Go memory: the garbage
// collector must not track it and cgo's pointer checks do not apply to it.
//
// # Resources
//
// A Handle owns host memory, a plan cache and a cuBLASLt context. Close it when
// done. No finalizer is set: the garbage collector sees only a few bytes of Go
// memory behind a Handle, so it would run a finalizer late or never, and a
// finalizer racing with a call in flight would need a runtime.KeepAlive in every
// method. Descriptions ([TensorDesc], [AttentionDesc]) are plain Go values; the
// C descriptors they stand for live only for the duration of one call.
//
// # Context parallelism
//
// A sequence too long for one GPU can be sharded over the ranks of an NCCL
// communicator, one rank per process (and GPU). Each process creates a
// [ContextParallel] from its handle and the caller's ncclComm_t
// ([Handle.NewContextParallel]) and puts it in [AttentionDesc.ContextParallel];
// its Forward and Backward calls, made with descriptors of the rank's local
// shards, then compute attention over the whole sequence, passing K/V around a
// ring. Every rank makes the same calls with the same shapes in the same order.
// [ContextParallel.Shard] says which tokens of the sequence a rank holds
// ([ShardingZigzag] balances a causal mask). The package does not bind NCCL:
// the communicator is created and destroyed by the caller.
// [Handle.NewContextParallelForDescription] makes an object without a
// communicator that sizes workspaces and describes plans only. A library built
// without NCCL returns an [*Error] with StatusNotSupported from
// NewContextParallel.
//
// # Threads
//
// A Handle may be used from several goroutines at once, except that the
// stream set with [Handle.SetStream] is shared: goroutines that enqueue on
// different streams should use one Handle each. Close must not run
// concurrently with other calls on the same Handle.
package ffpa
