#include "cp/nccl_transport.h"

#include "core/error.h"

#include <nccl.h>

namespace ffpa::cp {
namespace {

void checkNccl(ncclResult_t result, const char* what) {
  require(result == ncclSuccess, FFPA_STATUS_EXECUTION_FAILED_NCCL, what, " failed: ",
          ncclGetErrorString(result), " (", static_cast<int>(result), ")");
}

class NcclTransport final : public Transport {
 public:
  NcclTransport(ncclComm_t comm, int32_t device) : comm_(comm) {
    int commDevice = -1;
    checkNccl(ncclCommCuDevice(comm, &commDevice), "ncclCommCuDevice");
    // NCCL would be handed buffers of another device: an error or a hang far from the cause.
    require(commDevice == device, FFPA_STATUS_BAD_PARAM, "comm belongs to CUDA device ", commDevice,
            "; the handle's device is ", device, " (one communicator per device, as ncclCommInitRank makes them)");
    checkNccl(ncclCommCount(comm, &ranks_), "ncclCommCount");
    checkNccl(ncclCommUserRank(comm, &rank_), "ncclCommUserRank");
  }
  int32_t ranks() const override { return ranks_; }
  int32_t rank() const override { return rank_; }

  // One group: every send to rank + 1 and every receive from rank - 1 of the exchange.
  void exchange(const Transfer* transfers, int count, cudaStream_t stream) override {
    const int next = (rank_ + 1) % ranks_;
    const int prev = (rank_ + ranks_ - 1) % ranks_;
    checkNccl(ncclGroupStart(), "ncclGroupStart");
    ncclResult_t first = ncclSuccess;
    for (int i = 0; i < count && first == ncclSuccess; ++i) {
      first = ncclSend(transfers[i].send, transfers[i].bytes, ncclUint8, next, comm_, stream);
      if (first == ncclSuccess) {
        first = ncclRecv(transfers[i].recv, transfers[i].bytes, ncclUint8, prev, comm_, stream);
      }
    }
    const ncclResult_t end = ncclGroupEnd();  // always closes the group, even after a failure
    checkNccl(first, "ncclSend/ncclRecv");
    checkNccl(end, "ncclGroupEnd");
  }

 private:
  ncclComm_t comm_;
  int ranks_ = 0;
  int rank_ = 0;
};

}  // namespace

std::unique_ptr<Transport> ncclTransport(ncclComm* comm, int32_t device) {
  return std::make_unique<NcclTransport>(comm, device);
}

}  // namespace ffpa::cp
