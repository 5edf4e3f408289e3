// How the ranks of a ring exchange blocks: NCCL between processes (nccl_transport.cpp), or, in the
// tests, copies between the simulated ranks of one process. The ring attention only ever sends to
// rank + 1 and receives from rank - 1 (mod P), stream-ordered.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ffpa::cp {

struct Transfer {
  const void* send;  // `bytes` of device memory for rank + 1
  void* recv;        // `bytes` of device memory, filled from rank - 1's `send` of the same index
  size_t bytes;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int32_t ranks() const = 0;
  virtual int32_t rank() const = 0;
  // Enqueues one exchange of `count` transfers on `stream` (all of them in one group, so that no
  // rank waits on another's later transfer). Allocates nothing; throws ffpa::Error.
  virtual void exchange(const Transfer* transfers, int count, cudaStream_t stream) = 0;
};

}  // namespace ffpa::cp
