// The ring's exchanges over NCCL (compiled when the build found NCCL: FFPA_HAVE_NCCL).
#pragma once

#include "cp/transport.h"

#include <memory>

struct ncclComm;

namespace ffpa::cp {

// Reads the rank and size of `comm` (throws ffpa::Error, EXECUTION_FAILED_NCCL, when NCCL fails;
// BAD_PARAM when `comm` is not a communicator of CUDA device `device`).
std::unique_ptr<Transport> ncclTransport(ncclComm* comm, int32_t device);

}  // namespace ffpa::cp
