// Kernel launches through cudaLaunchKernel, for .cu files.
//
// Why not <<<>>> followed by cudaGetLastError(): that reads the thread's last-error state, which
// may hold an unrelated error the caller left pending; libffpa would blame it on its own kernel and
// clear it. cudaLaunchKernel returns the error of this launch alone.
#pragma once

#include "core/cuda_check.h"

#include <cuda_runtime.h>

#include <tuple>
#include <type_traits>
#include <utility>

namespace ffpa {

template <class... Params, class... Args>
void launchKernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                  cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) > 0 && sizeof...(Params) == sizeof...(Args),
                "pass one argument per kernel parameter");
  // The arguments converted to the exact parameter types: cudaLaunchKernel copies each parameter
  // from its pointer with the size the kernel declares.
  std::tuple<std::remove_cv_t<Params>...> values(std::forward<Args>(args)...);
  const cudaError_t status = std::apply(
      [&](auto&... value) {
        void* pointers[] = {static_cast<void*>(&value)...};
        return cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, pointers, 0, stream);
      },
      values);
  checkCuda(status, name);
}

}  // namespace ffpa
