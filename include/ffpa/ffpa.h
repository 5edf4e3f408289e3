/*
 * libffpa: fast attention for large head dimensions on NVIDIA GPUs.
 * SPDX-License-Identifier: Apache-2.0
 */

/**
 * @file ffpa.h
 * @brief The whole public interface of libffpa.
 *
 * libffpa computes scaled dot-product attention, forward and backward, for head dimensions up to
 * #FFPA_MAX_HEAD_DIM. The interface follows the cuDNN pattern:
 *
 *  1. create a handle with ffpaCreate() (bound to the current CUDA device) and give it a stream
 *     with ffpaSetStream();
 *  2. optionally tune its behaviour with ffpaSetPolicy() (every knob also has an environment
 *     variable, read when the handle is created);
 *  3. describe the tensors (ffpaSetTensorDescriptor()) and the attention itself
 *     (ffpaSetAttentionAttribute());
 *  4. ask for the workspace size (ffpaGetAttentionForwardWorkspaceSize()), allocate it once;
 *  5. run ffpaAttentionForward() / ffpaAttentionBackward() as often as needed.
 *
 * **Error model.** Every function returns an #ffpaStatus_t. Statuses are grouped by category
 * (#FFPA_STATUS_CATEGORY): a failing call also stores a detailed, thread-local message that names
 * the offending argument and the allowed values; read it with ffpaGetLastErrorString(). No
 * function aborts the process or lets a C++ exception escape.
 *
 * **Execution.** ffpaAttentionForward() and ffpaAttentionBackward() only enqueue work on the
 * handle's stream: they never allocate device memory and never synchronize, so they can be
 * captured in a CUDA graph. The first call with a new problem plans it on the host (a few
 * microseconds to milliseconds); the workspace-size queries plan too, so calling them first
 * takes all planning out of the execute path.
 *
 * **Threads.** Handles, descriptors and the functions of this header may be used from several
 * threads at once, with one exception: a descriptor must not be modified while another thread
 * reads it. Policies and the stream are snapshotted at the start of each call.
 *
 * **Compatibility.** The header compiles as C11 and C++17 and needs no CUDA header. All types
 * have fixed widths; enumerations have explicit values and are 32 bits wide; there are no
 * bit-fields, unions, variadic functions or structures passed by value, so the interface is
 * easy to bind from Rust, Go, Python and other languages.
 */

#ifndef FFPA_FFPA_H
#define FFPA_FFPA_H

#include <stddef.h>
#include <stdint.h>

/** @cond FFPA_INTERNAL */
#if defined(__GNUC__)
#define FFPA_API __attribute__((visibility("default")))
#else
#define FFPA_API
#endif
/* In C++ the enums get int32_t as their underlying type, so that every 32-bit value a C caller
 * may pass (negative ones included) is a valid value of the enum type inside the library. */
#ifdef __cplusplus
#define FFPA_ENUM_TYPE : int32_t
#else
#define FFPA_ENUM_TYPE
#endif
/** @endcond */

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================================ */
/** @defgroup version Versions
 *  @{ */

/** Major version: changes only with an incompatible change of the interface or the ABI. */
#define FFPA_VERSION_MAJOR 0
/** Minor version: grows when functions, enumerators or knobs are added. */
#define FFPA_VERSION_MINOR 1
/** Patch version: fixes that change no interface. */
#define FFPA_VERSION_PATCH 0

/** The version this header describes: `MAJOR * 10000 + MINOR * 100 + PATCH` (0.1.0 is 100). */
#define FFPA_VERSION (FFPA_VERSION_MAJOR * 10000 + FFPA_VERSION_MINOR * 100 + FFPA_VERSION_PATCH)

/**
 * True when a library of version @p runtime can serve a program built with this header.
 *
 * The rule: the same major version, and a runtime minor version at least the header's. The
 * library's file name carries the major version (`libffpa.so.0`), so the dynamic linker already
 * refuses a different major; check the minor with
 * `FFPA_VERSION_IS_COMPATIBLE(ffpaGetVersion())`.
 */
#define FFPA_VERSION_IS_COMPATIBLE(runtime)                                                      \
  ((uint32_t)(runtime) / 10000u == (uint32_t)FFPA_VERSION_MAJOR &&                               \
   (uint32_t)(runtime) % 10000u / 100u >= (uint32_t)FFPA_VERSION_MINOR)

/**
 * The version of the loaded library, encoded as #FFPA_VERSION.
 * @return `MAJOR * 10000 + MINOR * 100 + PATCH` of the library, which may differ from the header.
 */
FFPA_API uint32_t ffpaGetVersion(void);

/**
 * A one-line, static description of how the library was built: version, CUDA version, compiled
 * architectures, head-dimension set and stage counts. Meant for bug reports and logs.
 * @return A NUL-terminated string owned by the library; never NULL.
 */
FFPA_API const char* ffpaGetBuildInfo(void);

/** @} */

/* ============================================================================================ */
/** @defgroup status Status codes and error messages
 *  @{ */

/**
 * The result of every libffpa function.
 *
 * Codes are grouped by thousands into categories (see #FFPA_STATUS_CATEGORY); a caller that only
 * cares about the kind of failure compares the category, one that wants detail compares the
 * exact code. Codes are never renumbered; new ones are only added.
 */
typedef enum ffpaStatus FFPA_ENUM_TYPE {
  /** The call succeeded. */
  FFPA_STATUS_SUCCESS = 0,

  /** Category 1000: the library or the device could not be initialized. */
  FFPA_STATUS_NOT_INITIALIZED = 1000,
  /** No usable CUDA device or driver, or the handle was created with ffpaCreateForDevice() and
   *  can plan but not execute. */
  FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE = 1001,
  /** A CUDA library libffpa depends on (cuBLASLt) failed to initialize. */
  FFPA_STATUS_NOT_INITIALIZED_LIBRARY = 1002,

  /** Category 2000: an argument is wrong. The message names the argument and what is allowed. */
  FFPA_STATUS_BAD_PARAM = 2000,
  /** A required pointer argument is NULL. */
  FFPA_STATUS_BAD_PARAM_NULL_POINTER = 2002,
  /** A device pointer is not aligned as required (16 bytes for tensors, 256 for workspace). */
  FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER = 2003,
  /** A descriptor was used before it was set. */
  FFPA_STATUS_BAD_PARAM_NOT_FINALIZED = 2004,
  /** A value is outside its allowed range, or an enumerator is unknown. */
  FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND = 2005,
  /** A workspace or output buffer is smaller than required. */
  FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT = 2006,
  /** The tensors of one call disagree in shape (batch, heads, sequence or head dimension). */
  FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH = 2008,
  /** The tensors of one call disagree in data type, or a tensor has the wrong type for its role. */
  FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH = 2009,
  /** The value passed to a typed setter has the wrong size for the knob's or attribute's type. */
  FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE = 2010,
  /** Strides are invalid: non-positive, overlapping, or not unit on the last dimension. */
  FFPA_STATUS_BAD_PARAM_STRIDE = 2011,
  /** Two settings that exclude each other were both requested. */
  FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS = 2012,
  /** An environment variable read by ffpaCreate() holds a malformed value; the message names
   *  the variable and the accepted values. */
  FFPA_STATUS_BAD_PARAM_ENVIRONMENT = 2013,
  /** The handle or descriptor is not a live libffpa object (destroyed, or never created). */
  FFPA_STATUS_BAD_PARAM_INVALID_HANDLE = 2014,

  /** Category 3000: valid arguments that this build or this device cannot serve. */
  FFPA_STATUS_NOT_SUPPORTED = 3000,
  /** The shape is outside what the library supports (for example a head dimension above
   *  #FFPA_MAX_HEAD_DIM). */
  FFPA_STATUS_NOT_SUPPORTED_SHAPE = 3002,
  /** The data type is not supported for this operation. */
  FFPA_STATUS_NOT_SUPPORTED_DATA_TYPE = 3003,
  /** The memory layout (strides) is not supported. */
  FFPA_STATUS_NOT_SUPPORTED_LAYOUT = 3004,
  /** The device's compute capability is not supported, or no kernel was compiled for it. */
  FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH = 3007,
  /** The kernel the policies ask for needs more shared memory than the device offers. */
  FFPA_STATUS_NOT_SUPPORTED_SHARED_MEMORY = 3010,
  /** The combination of policies is illegal for this problem, or was not compiled into this
   *  build; the message says which knob to change. libffpa never silently substitutes. */
  FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION = 3011,

  /** Category 4000: a bug or resource failure inside libffpa. */
  FFPA_STATUS_INTERNAL_ERROR = 4000,
  /** Host memory could not be allocated. */
  FFPA_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED = 4001,

  /** Category 5000: the GPU work could not be launched or failed. */
  FFPA_STATUS_EXECUTION_FAILED = 5000,
  /** A CUDA runtime call failed; the message carries CUDA's error name. */
  FFPA_STATUS_EXECUTION_FAILED_CUDA = 5001,
  /** A cuBLASLt call failed; the message carries cuBLAS's status name. */
  FFPA_STATUS_EXECUTION_FAILED_CUBLAS = 5002,
  /** The sanity check (#FFPA_POLICY_SANITY_CHECK) found NaN or infinity in an input or output. */
  FFPA_STATUS_EXECUTION_FAILED_NON_FINITE = 5003,
  /** An NCCL call of a context-parallel call failed; the message carries NCCL's error string. */
  FFPA_STATUS_EXECUTION_FAILED_NCCL = 5004,

  /** @cond FFPA_INTERNAL */
  FFPA_STATUS_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaStatus_t;

/** The category of a status: #FFPA_STATUS_SUCCESS, #FFPA_STATUS_NOT_INITIALIZED,
 *  #FFPA_STATUS_BAD_PARAM, #FFPA_STATUS_NOT_SUPPORTED, #FFPA_STATUS_INTERNAL_ERROR or
 *  #FFPA_STATUS_EXECUTION_FAILED. */
#define FFPA_STATUS_CATEGORY(status) ((ffpaStatus_t)((int32_t)(status) / 1000 * 1000))

/**
 * The name of a status code, for example `"FFPA_STATUS_BAD_PARAM_NULL_POINTER"`.
 * @param status Any value; unknown values give `"FFPA_STATUS_UNKNOWN"`.
 * @return A static NUL-terminated string; never NULL.
 */
FFPA_API const char* ffpaGetErrorString(ffpaStatus_t status);

/**
 * The detailed message of the last failing libffpa call on the calling thread.
 *
 * The message names the function, the argument and the allowed values, for example
 * `ffpaSetPolicy: FFPA_POLICY_STAGES: 7 is out of range; allowed: an integer from 0 to 4 (0 = auto)`. A successful
 * call leaves the message unchanged (like `errno`); a thread that never failed gets "".
 *
 * @param buffer Where to copy the message, NUL-terminated and truncated to fit; may be NULL
 *               when @p size is 0.
 * @param size   Size of @p buffer in bytes, 0 allowed.
 * @return The length of the whole message, without the NUL: a return value `>= size` means the
 *         copy was truncated (call again with a buffer of `return + 1` bytes).
 */
FFPA_API size_t ffpaGetLastErrorString(char* buffer, size_t size);

/** @} */

/* ============================================================================================ */
/** @defgroup types Common types and limits
 *  @{ */

/** The largest head dimension (of Q·Kᵀ and of V) libffpa accepts. */
#define FFPA_MAX_HEAD_DIM 1024

/** The largest number of dimensions of a tensor descriptor. */
#define FFPA_MAX_TENSOR_DIMS 4

/** The same type as `cudaStream_t`, declared without CUDA headers. NULL is the legacy default
 *  stream. */
typedef struct CUstream_st* ffpaStream_t;

/** Element types of tensors. */
typedef enum ffpaDataType FFPA_ENUM_TYPE {
  /** IEEE half precision (`__half`). Attention accumulates in fp32 unless a policy says otherwise. */
  FFPA_DATA_TYPE_FLOAT16 = 0,
  /** bfloat16 (`__nv_bfloat16`); always accumulated in fp32. */
  FFPA_DATA_TYPE_BFLOAT16 = 1,
  /** IEEE single precision. Required for the log-sum-exp tensor; accepted for Q/K/V/O only by
   *  the reference path (#FFPA_POLICY_REFERENCE_BACKEND is then chosen automatically). */
  FFPA_DATA_TYPE_FLOAT32 = 2,
  /** @cond FFPA_INTERNAL */
  FFPA_DATA_TYPE_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaDataType_t;

/** @} */

/* ============================================================================================ */
/** @defgroup logging Logging
 *  @{ */

/** Severity of log messages, also the value type of #FFPA_POLICY_LOG_LEVEL. */
typedef enum ffpaLogLevel FFPA_ENUM_TYPE {
  FFPA_LOG_LEVEL_OFF = 0,     /**< Nothing is logged. */
  FFPA_LOG_LEVEL_ERROR = 1,   /**< GPU work that failed, internal errors. */
  FFPA_LOG_LEVEL_WARNING = 2, /**< Suspicious but valid use (the default level). */
  FFPA_LOG_LEVEL_INFO = 3,    /**< Plans chosen; calls refused for their arguments or an
                                   unsupported request (with the status and message). */
  FFPA_LOG_LEVEL_DEBUG = 4,   /**< Why each kernel was or was not chosen; each distinct message
                                   once per process. */
  /** @cond FFPA_INTERNAL */
  FFPA_LOG_LEVEL_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaLogLevel_t;

/**
 * Receives log messages.
 * @param level    Severity of the message.
 * @param message  NUL-terminated text without a trailing newline; valid only during the call.
 * @param userData The pointer given to ffpaSetLogCallback().
 *
 * Called from whichever thread logs, possibly several at once; must not call back into libffpa.
 */
typedef void (*ffpaLogCallback_t)(ffpaLogLevel_t level, const char* message, void* userData);

/**
 * Sends all log messages of the process to @p callback instead of standard error.
 *
 * Which messages are produced is decided per handle by #FFPA_POLICY_LOG_LEVEL (environment
 * variable `FFPA_LOGGER_LEVEL`); messages not tied to a handle (a failing ffpaCreate()) use the
 * environment variable. Debug messages are emitted once per process per distinct text.
 *
 * Once this function returns, the previous callback is no longer running and is never called
 * again, so its @p userData may be released (libffpa calls the callback under a lock, which is
 * also why the callback must not call back into libffpa).
 *
 * @param callback The receiver, or NULL to restore the default (standard error).
 * @param userData Passed back to every call of @p callback; may be NULL.
 * @return #FFPA_STATUS_SUCCESS.
 */
FFPA_API ffpaStatus_t ffpaSetLogCallback(ffpaLogCallback_t callback, void* userData);

/** @} */

/* ============================================================================================ */
/** @defgroup handle Handle and device
 *  @{ */

/** An opaque library context bound to one CUDA device: stream, policies and plan cache. */
typedef struct ffpaContext* ffpaHandle_t;

/**
 * The properties of a device that decide plans. ffpaGetDeviceDesc() fills it from a handle;
 * ffpaCreateForDevice() takes one to plan for a device that is not present.
 *
 * Set @ref structSize to `sizeof(ffpaDeviceDesc_t)` before passing it: the structure may grow
 * at its end in later minor versions, and the library reads or writes only @ref structSize bytes.
 */
typedef struct ffpaDeviceDesc {
  uint32_t structSize;             /**< In: `sizeof(ffpaDeviceDesc_t)` of the caller. */
  int32_t ordinal;                 /**< CUDA device ordinal (>= 0). */
  int32_t smVersion;               /**< Compute capability as `major * 10 + minor`: 80, 86, 89, 90,
                                        100, 120. At least 80. */
  int32_t smCount;                 /**< Number of streaming multiprocessors, at least 1. */
  int64_t sharedMemPerBlockOptin;  /**< Bytes of shared memory one block may use after opt-in
                                        (`cudaDevAttrMaxSharedMemoryPerBlockOptin`), at least 48 KiB. */
  int64_t sharedMemPerSm;          /**< Bytes of shared memory per multiprocessor, at least
                                        @ref sharedMemPerBlockOptin. */
  int64_t globalMemBytes;          /**< Bytes of device memory, at least 1. */
  char name[256];                  /**< Device name as CUDA reports it, NUL-terminated. */
} ffpaDeviceDesc_t;

/**
 * Creates a handle bound to the current CUDA device.
 *
 * Reads the policy environment variables (see #ffpaPolicyKnob_t): a malformed value fails with
 * #FFPA_STATUS_BAD_PARAM_ENVIRONMENT naming the variable. Creates the cuBLASLt context. Work goes
 * to the default stream until ffpaSetStream() is called.
 *
 * @param[out] handle Receives the new handle; set to NULL on failure.
 * @return #FFPA_STATUS_SUCCESS;
 *         #FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE without a usable GPU or driver;
 *         #FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH for a device below compute capability 8.0;
 *         #FFPA_STATUS_BAD_PARAM_ENVIRONMENT; #FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS when
 *         `ENABLE_FFPA_FORCE_QK_F16` and `ENABLE_FFPA_FORCE_PV_F16` are both 1;
 *         #FFPA_STATUS_NOT_INITIALIZED_LIBRARY when cuBLASLt cannot start;
 *         #FFPA_STATUS_BAD_PARAM_NULL_POINTER.
 */
FFPA_API ffpaStatus_t ffpaCreate(ffpaHandle_t* handle);

/**
 * Creates a handle for a described device that need not be present.
 *
 * Such a handle plans, reports workspace sizes, keeps policies and a plan cache exactly like a
 * handle from ffpaCreate(), but cannot execute: ffpaAttentionForward() and
 * ffpaAttentionBackward() return #FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE after checking their
 * arguments. Use it to size workspaces ahead of time or to inspect plans on a machine without
 * a GPU.
 *
 * @param[out] handle Receives the new handle; set to NULL on failure.
 * @param device      The device to plan for; every field is checked (bounds in
 *                    #ffpaDeviceDesc_t).
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for a field out of range;
 *         #FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT for a @c structSize too small;
 *         #FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH; #FFPA_STATUS_BAD_PARAM_ENVIRONMENT;
 *         #FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS.
 */
FFPA_API ffpaStatus_t ffpaCreateForDevice(ffpaHandle_t* handle, const ffpaDeviceDesc_t* device);

/**
 * Destroys a handle and its plan cache. Work already enqueued is not waited for; the caller
 * must not destroy a handle while another thread uses it.
 * @param handle The handle, or NULL (then nothing happens).
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaDestroy(ffpaHandle_t handle);

/**
 * Sets the stream the handle's work is enqueued on.
 * @param handle The handle.
 * @param stream A stream of the handle's device, or NULL for the legacy default stream.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaSetStream(ffpaHandle_t handle, ffpaStream_t stream);

/**
 * Reads the stream set by ffpaSetStream().
 * @param handle      The handle.
 * @param[out] stream Receives the stream (NULL for the default stream).
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaGetStream(ffpaHandle_t handle, ffpaStream_t* stream);

/**
 * Describes the device a handle is bound to.
 * @param handle      The handle.
 * @param[out] device Filled up to its @c structSize, which the caller sets first.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT for a @c structSize too small;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaGetDeviceDesc(ffpaHandle_t handle, ffpaDeviceDesc_t* device);

/** @} */

/* ============================================================================================ */
/** @defgroup policy Policies (runtime knobs)
 *  @{ */

/** The value type of a policy knob, which decides what ffpaSetPolicy() accepts. */
typedef enum ffpaPolicyType FFPA_ENUM_TYPE {
  /** `int32_t`, 0 or 1. */
  FFPA_POLICY_TYPE_BOOL = 0,
  /** `int32_t` within the knob's bounds. */
  FFPA_POLICY_TYPE_INT32 = 1,
  /** `int64_t` within the knob's bounds. */
  FFPA_POLICY_TYPE_INT64 = 2,
  /** `int32_t` holding one of the enumerators listed for the knob (contiguous from 0). */
  FFPA_POLICY_TYPE_ENUM = 3,
  /** A NUL-terminated string; the size passed includes the NUL, at most 4096 bytes. */
  FFPA_POLICY_TYPE_STRING = 4,
  /** @cond FFPA_INTERNAL */
  FFPA_POLICY_TYPE_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaPolicyType_t;

/** Accumulator precision of the two matrix products (value type of #FFPA_POLICY_ACCUMULATOR). */
typedef enum ffpaAccumulator FFPA_ENUM_TYPE {
  /** Both Q·Kᵀ and P·V accumulate in fp32 (the default; required for bf16). */
  FFPA_ACCUMULATOR_F32 = 0,
  /** Q·Kᵀ accumulates in fp16, P·V in fp32 (`ENABLE_FFPA_FORCE_QK_F16=1`). fp16 inputs only. */
  FFPA_ACCUMULATOR_QK_F16 = 1,
  /** Q·Kᵀ accumulates in fp32, P·V in fp16 (`ENABLE_FFPA_FORCE_PV_F16=1`). fp16 inputs only. */
  FFPA_ACCUMULATOR_PV_F16 = 2,
  /** Both products accumulate in fp16: fastest on consumer GPUs, least accurate. fp16 only. */
  FFPA_ACCUMULATOR_F16 = 3,
  /** @cond FFPA_INTERNAL */
  FFPA_ACCUMULATOR_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaAccumulator_t;

/** Search space of runtime autotuning (value type of #FFPA_POLICY_AUTOTUNE_MODE). */
typedef enum ffpaAutotuneMode FFPA_ENUM_TYPE {
  FFPA_AUTOTUNE_MODE_FAST = 0, /**< A small search space (the default). */
  FFPA_AUTOTUNE_MODE_MAX = 1,  /**< A larger search space: slower to tune, possibly faster to run. */
  /** @cond FFPA_INTERNAL */
  FFPA_AUTOTUNE_MODE_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaAutotuneMode_t;

/**
 * The runtime knobs of a handle.
 *
 * Each knob has a value type (#ffpaPolicyType_t), bounds and a default, all available at run
 * time from ffpaGetPolicyInfo(). Precedence: a value set with ffpaSetPolicy() beats the
 * environment variable read at ffpaCreate(), which beats the default. Boolean environment
 * variables accept `0`/`1` (also `true`/`false`, `on`/`off`, `yes`/`no`); enumerations accept
 * their names or numbers; an empty variable counts as unset.
 *
 * Kernel knobs choose among compiled kernels: a combination no compiled kernel offers fails
 * with #FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION instead of being silently replaced (see
 * #FFPA_POLICY_HOPPER_KERNELS for how they choose between the Hopper and `mma.sync` kernels). The
 * backward kernels follow #FFPA_POLICY_STAGES, #FFPA_POLICY_PREFETCH_QKV,
 * #FFPA_POLICY_QKV_SMEM_SHARE, #FFPA_POLICY_PERSIST_Q_G2S (Q and dO rows of the dQ kernel) and
 * #FFPA_POLICY_LAUNCH_GRID_DNHB; the other kernel knobs concern the forward only, and gradients
 * always accumulate in fp32.
 */
typedef enum ffpaPolicyKnob FFPA_ENUM_TYPE {
  /* --- Kernel selection (values 0-99) --- */
  /** #ffpaAccumulator_t, default #FFPA_ACCUMULATOR_F32: the forward's accumulators (the backward
   *  always accumulates in fp32). Any other value needs fp16 tensors and a
   *  fast forward kernel that offers it: a problem only the reference path serves fails with
   *  #FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION, unless #FFPA_POLICY_REFERENCE_BACKEND is set
   *  (the reference always accumulates in fp32). Environment: `ENABLE_FFPA_FORCE_QK_F16` and
   *  `ENABLE_FFPA_FORCE_PV_F16` (mutually exclusive: both set to 1 fails), or `FFPA_ACCUMULATOR`
   *  (`f32`, `qk_f16`, `pv_f16`, `f16`). The other kernel knobs change speed, not results; the
   *  reference path ignores them. */
  FFPA_POLICY_ACCUMULATOR = 0,
  /** Bool, default 1: prefetch the next Q/K/V chunks during the current product (5-10% faster).
   *  Environment: `ENABLE_FFPA_PREFETCH_QKV`. */
  FFPA_POLICY_PREFETCH_QKV = 1,
  /** Bool, default 0: Q, K and V share one shared-memory buffer (for devices with little shared
   *  memory; overlaps less). Environment: `ENABLE_FFPA_QKV_SMEM_SHARE`. */
  FFPA_POLICY_QKV_SMEM_SHARE = 2,
  /** Bool, default 1: Q tiles avoid bank conflicts by swizzling (1) or by padding (0).
   *  Environment: `ENABLE_FFPA_SMEM_SWIZZLE_Q`. */
  FFPA_POLICY_SMEM_SWIZZLE_Q = 3,
  /** Bool, default 1: as #FFPA_POLICY_SMEM_SWIZZLE_Q for K. Environment:
   *  `ENABLE_FFPA_SMEM_SWIZZLE_K`. */
  FFPA_POLICY_SMEM_SWIZZLE_K = 4,
  /** Bool, default 1: as #FFPA_POLICY_SMEM_SWIZZLE_Q for V. Environment:
   *  `ENABLE_FFPA_SMEM_SWIZZLE_V`. */
  FFPA_POLICY_SMEM_SWIZZLE_V = 5,
  /** Bool, default 1: keep the whole Q tile in shared memory (head dims <= 320): more shared
   *  memory, fewer global loads. Environment: `ENABLE_FFPA_PERSIST_Q_G2S`. */
  FFPA_POLICY_PERSIST_Q_G2S = 6,
  /** Bool, default 1: keep K/V tiles in shared memory for head dims <= 256, which selects the
   *  coarse (FlashAttention-2 style) tiling there. Environment: `ENABLE_FFPA_PERSIST_KV_G2S`. */
  FFPA_POLICY_PERSIST_KV_G2S = 7,
  /** Bool, default 0: keep Q fragments in registers (head dims < 512): less traffic, more
   *  registers. Environment: `ENABLE_FFPA_PERSIST_Q_S2R`. */
  FFPA_POLICY_PERSIST_Q_S2R = 8,
  /** Bool, default 1: keep V fragments in registers in the small-head-dim kernel.
   *  Environment: `ENABLE_FFPA_PERSIST_V_S2R`. */
  FFPA_POLICY_PERSIST_V_S2R = 9,
  /** Bool, default 0: double-buffer K/V fragments in registers to overlap `ldmatrix` with MMA.
   *  Environment: `ENABLE_FFPA_REGISTERS_PIPE_KV`. */
  FFPA_POLICY_REGISTERS_PIPE_KV = 10,
  /** Bool, default 0: launch with grid `(N/Br, H, B)` (1) instead of `(N/Br, B*H)` (0).
   *  Environment: `ENABLE_FFPA_LAUNCH_GRID_DNHB`. */
  FFPA_POLICY_LAUNCH_GRID_DNHB = 11,
  /** Int32 0-4, default 0: the number of cp.async pipeline stages; 0 lets the planner (or a
   *  tuned config) choose. Environment: `FFPA_STAGES`. */
  FFPA_POLICY_STAGES = 12,
  /** Bool, default 1: on compute capability 9.0, run the Hopper forward kernel (TMA loads,
   *  `wgmma`, warp-specialized warpgroups; d_v up to 512 with d_qk up to 576 (d_v up to 64 only
   *  without attention slices and where shared memory holds d_qk), and d_v 513..1024
   *  with d_qk up to 1024 on clusters of two CTAs; fp16 and bf16) and the backward's Hopper
   *  gradient kernels (dQ and dK/dV for head dims up to 1024; one CTA per tile up to 256,
   *  clusters of up to four CTAs above) where they apply; 0 keeps the `mma.sync` kernels. The
   *  `mma.sync` kernels serve the rest, and everything when any other kernel knob except
   *  #FFPA_POLICY_LAUNCH_GRID_DNHB is set to a value other than its default (those knobs shape
   *  the `mma.sync` kernels only). Needs a build with `90a` in `build_arch` (without it the plan
   *  says so and the `mma.sync` kernels serve). Environment: `ENABLE_FFPA_HOPPER_KERNELS`. */
  FFPA_POLICY_HOPPER_KERNELS = 13,
  /** Int32 0-8, default 0: in the Hopper forward's softmax, of every 8 exponentials (`exp2`) of
   *  a row's scores, how many a degree-3 FMA polynomial computes instead of the special-function
   *  unit (relative error below 1e-4; fully masked keys still give exactly 0), which moves work
   *  to the FMA pipes when the special-function unit limits the kernel. A value other than 0
   *  needs the Hopper forward (#FFPA_POLICY_HOPPER_KERNELS on compute capability 9.0): a forward
   *  another kernel serves fails with #FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION. The backward
   *  ignores it. Environment: `FFPA_EXP2_EMULATION`. */
  FFPA_POLICY_EXP2_EMULATION = 14,
  /** Bool, default 0: in the Hopper forward for d_v up to 512 without attention slices, let the
   *  CTAs of two adjacent 64-row tiles share each K and V tile: a cluster of two in which each
   *  CTA loads half of every tile with TMA multicast into both, so that the L2 delivers K and V
   *  once per 128 query rows instead of once per 64 (for d_v 65..256 in place of the default,
   *  which splits 128 rows of one CTA between its consumers and reads K and V once per 128 rows
   *  too). Problems of one row tile, sliced problems and
   *  larger head dims keep one CTA per row tile. Left at its default, a tuned config or runtime
   *  autotune may choose it per shape (launch parameter `kv_multicast`). A forward another kernel
   *  serves ignores it, and so does the backward. Environment: `FFPA_HOPPER_KV_MULTICAST`. */
  FFPA_POLICY_HOPPER_KV_MULTICAST = 15,
  /** Bool, default 1: a forward whose query heads share K and V (GQA, MQA) and have fewer than
   *  128 query rows each (decode, speculative decoding) runs as a problem of the KV heads whose
   *  rows are the query rows of all the heads of a group: the same memory with other strides,
   *  so that a row tile holds up to a tile of rows reading the same K and V instead of a few
   *  rows padded to the tile (one query row used 1 of a tile's 64 or 128 rows). Applies without
   *  a causal mask, and to one query row with #FFPA_CAUSAL_BOTTOM_RIGHT (which sees every key);
   *  not with attention slices. Q, O and the LSE must each let the rows of a head and the heads
   *  of a group form one stride, in the same order: one query row always does, and so does the
   *  packed `[B, H, N, D]` layout, and `[B, N, H, D]` with one KV head. The plan's config then
   *  ends with `query_heads_as_rows=G` (G query heads per KV head), and its kernel is the one
   *  chosen for the merged problem. The backward ignores it. Environment:
   *  `FFPA_QUERY_HEADS_AS_ROWS`. */
  FFPA_POLICY_QUERY_HEADS_AS_ROWS = 16,
  /** Int32 0-32, default 0: split-KV for the fast forward kernels. When a problem's row tiles
   *  (after #FFPA_POLICY_QUERY_HEADS_AS_ROWS) are too few to fill the GPU (decode, short queries
   *  of few heads, small batches), the KV tiles each row tile sees are cut into runs, one CTA per
   *  run and row tile; each writes an output normalised over its keys and its log-sum-exp in
   *  fp32 to the workspace, and a merge (ffpaAttentionMerge()'s arithmetic) writes O and LSE. 0
   *  lets the planner choose: no split where the grid fills 80% of the GPU's CTA slots, else the
   *  fewest runs (of at least 4 KV tiles each) whose waves of CTAs use the GPU within 85% of the
   *  best count (FlashAttention-2's choice), where a tuned config or runtime autotune may turn
   *  the split off or ask for longer runs (`split_kv`, `split_min_tiles`); 1 never splits; N asks
   *  for N runs (fewer where the keys have fewer tiles). Not with attention slices or the
   *  (N/Br, H, B) grid. The plan's
   *  config then says `key_splits=N split_tiles=T` and the forward's workspace holds the partial
   *  results (ffpaGetAttentionForwardWorkspaceSize()). The backward ignores it. Environment:
   *  `FFPA_KEY_SPLITS`. */
  FFPA_POLICY_KEY_SPLITS = 17,

  /* --- Tuned configs (values 100-199) --- */
  /** Bool, default 0: tune launch configs at run time, once per problem and process.
   *  Environment: `FFPA_AUTOTUNE`. */
  FFPA_POLICY_AUTOTUNE = 100,
  /** #ffpaAutotuneMode_t, default #FFPA_AUTOTUNE_MODE_FAST: the search space of tuning; a
   *  persisted config is used only when generated with the same mode. Environment:
   *  `FFPA_AUTOTUNE_MODE` (`fast`, `max`). */
  FFPA_POLICY_AUTOTUNE_MODE = 101,
  /** String, default "" (the installed config directory): where per-device tuned-config files
   *  are looked up. Environment: `FFPA_TUNED_CONFIG_DIR`. */
  FFPA_POLICY_TUNED_CONFIG_DIR = 102,
  /** Bool, default 0: ignore persisted tuned configs and use built-in launch defaults (for A/B
   *  comparisons). Environment: `FFPA_SKIP_PERSIST_TUNED_CONFIG`, also read under its historical
   *  spelling `FFPA_SKIP_PERSISIT_TUNED_CONFIG`. */
  FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG = 103,

  /* --- Correctness and debugging (values 200-299) --- */
  /** Bool, default 0: bit-identical results across runs with the same inputs, at some cost in
   *  speed (no floating-point atomics). Environment: `FFPA_DETERMINISTIC_MODE`, also
   *  `MAGI_ATTENTION_DETERMINISTIC_MODE`. */
  FFPA_POLICY_DETERMINISTIC = 200,
  /** Bool, default 0: after each call, synchronize the stream, check for CUDA errors and scan
   *  inputs and outputs for NaN/infinity (#FFPA_STATUS_EXECUTION_FAILED_NON_FINITE; K and V up
   *  to each batch entry's #FFPA_ATTENTION_KEY_LENGTHS count only). Slow; the check is skipped
   *  with a warning while the stream is being captured into a graph.
   *  Environment: `FFPA_SANITY_CHECK`, also `MAGI_ATTENTION_SANITY_CHECK`. */
  FFPA_POLICY_SANITY_CHECK = 201,
  /** Bool, default 0: run every call on the cuBLASLt reference path (fp32 GEMMs) instead of the
   *  fast kernels: slow, accurate, supports fp32. Environment: `FFPA_REFERENCE_BACKEND`, also
   *  `MAGI_ATTENTION_SDPA_BACKEND`. */
  FFPA_POLICY_REFERENCE_BACKEND = 202,
  /** Int64, default 536870912 (512 MiB), from 4096 to 2^50: the largest scratch the reference
   *  path uses for one chunk of heads and rows; smaller values give a smaller workspace and more,
   *  smaller GEMMs. The workspace adds 8 MiB for cuBLASLt; a chunk is never smaller than one query
   *  row of one K/V head (with its K and V), which can exceed a small budget. Environment:
   *  `FFPA_REFERENCE_CHUNK_BYTES`. */
  FFPA_POLICY_REFERENCE_CHUNK_BYTES = 203,

  /* --- Library (values 300-399) --- */
  /** Int32 0-1048576, default 1024: how many plans the handle's LRU plan cache keeps; 0
   *  disables caching (every call plans anew). Environment: `FFPA_PLAN_CACHE_CAPACITY`. */
  FFPA_POLICY_PLAN_CACHE_CAPACITY = 300,
  /** #ffpaLogLevel_t, default #FFPA_LOG_LEVEL_WARNING. Environment: `FFPA_LOGGER_LEVEL`
   *  (`OFF`, `ERROR`, `WARNING`, `INFO`, `DEBUG`, or 0-4). */
  FFPA_POLICY_LOG_LEVEL = 301,

  /** @cond FFPA_INTERNAL */
  FFPA_POLICY_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaPolicyKnob_t;

/** Where the current value of a knob comes from (see ffpaGetPolicySource()). */
typedef enum ffpaPolicySource FFPA_ENUM_TYPE {
  FFPA_POLICY_SOURCE_DEFAULT = 0,     /**< The built-in default. */
  FFPA_POLICY_SOURCE_ENVIRONMENT = 1, /**< An environment variable read by ffpaCreate(). */
  FFPA_POLICY_SOURCE_SETTER = 2,      /**< A call of ffpaSetPolicy() on this handle. */
  /** @cond FFPA_INTERNAL */
  FFPA_POLICY_SOURCE_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaPolicySource_t;

/**
 * Everything known about one knob, for introspection and generated documentation.
 * Set @ref structSize to `sizeof(ffpaPolicyInfo_t)` before calling ffpaGetPolicyInfo().
 */
typedef struct ffpaPolicyInfo {
  uint32_t structSize;        /**< In: `sizeof(ffpaPolicyInfo_t)` of the caller. */
  ffpaPolicyType_t type;      /**< Value type expected by ffpaSetPolicy(). */
  int64_t minValue;           /**< Smallest accepted value (numeric types; 0 for strings). */
  int64_t maxValue;           /**< Largest accepted value (numeric types; 4095, the longest
                                   length, for strings). */
  int64_t defaultValue;       /**< Value without setter or environment (numeric types). */
  const char* name;           /**< The enumerator's name, e.g. `"FFPA_POLICY_STAGES"`. */
  const char* environment;    /**< Environment variables read at ffpaCreate(), space-separated,
                                   primary first; "" if none. */
  const char* valueNames;     /**< For enumerations and booleans: the names of the values from
                                   @ref minValue up, space-separated; "" otherwise. */
  const char* defaultString;  /**< The default as text (for strings, the default string). */
  const char* description;    /**< One sentence. */
} ffpaPolicyInfo_t;

/**
 * Sets one knob of a handle. Takes effect for the calls that start afterwards.
 *
 * @param handle The handle.
 * @param knob   Which knob.
 * @param value  Pointer to the value, of the knob's type (see ffpaGetPolicyInfo()).
 * @param size   Size of the value in bytes: 4 for bool, int32 and enum knobs, 8 for int64 knobs,
 *               `strlen + 1` (at most 4096) for strings.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for an unknown knob or a value out of bounds;
 *         #FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE for a size that does not match the type, or a
 *         string without its NUL within @p size; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaSetPolicy(ffpaHandle_t handle, ffpaPolicyKnob_t knob, const void* value,
                                    size_t size);

/**
 * Reads the current value of one knob (setter, else environment, else default).
 *
 * @param handle           The handle.
 * @param knob             Which knob.
 * @param[out] value       Receives the value; may be NULL when @p size is 0.
 * @param size             Size of @p value in bytes; 0 only asks for the size.
 * @param[out] sizeWritten Receives the size the value needs (for strings including the NUL);
 *                         may be NULL.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for an unknown knob;
 *         #FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT when @p size is non-zero but too small;
 *         #FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE when @p size does not fit a numeric type;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaGetPolicy(ffpaHandle_t handle, ffpaPolicyKnob_t knob, void* value,
                                    size_t size, size_t* sizeWritten);

/**
 * Tells where the current value of one knob of a handle comes from.
 * @param handle      The handle.
 * @param knob        Which knob.
 * @param[out] source Receives the source of its value.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for an unknown knob;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaGetPolicySource(ffpaHandle_t handle, ffpaPolicyKnob_t knob,
                                          ffpaPolicySource_t* source);

/**
 * Describes a knob: type, bounds, default, environment variables. Needs no handle.
 * @param knob       Which knob.
 * @param[out] info  Filled up to its @c structSize, which the caller sets first; the strings are
 *                   static.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for an unknown knob;
 *         #FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT for a @c structSize too small.
 */
FFPA_API ffpaStatus_t ffpaGetPolicyInfo(ffpaPolicyKnob_t knob, ffpaPolicyInfo_t* info);

/**
 * Lists every knob this library knows, in the order of their values.
 * @param requested   Capacity of @p knobs (0 allowed, to ask for the count).
 * @param[out] count  Receives the number of knobs the library has.
 * @param[out] knobs  Receives the first `min(requested, *count)` knobs; may be NULL when
 *                    @p requested is 0.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for a negative @p requested.
 */
FFPA_API ffpaStatus_t ffpaGetPolicyKnobs(int32_t requested, int32_t* count,
                                         ffpaPolicyKnob_t* knobs);

/** @} */

/* ============================================================================================ */
/** @defgroup tensor Tensor descriptors
 *  @{ */

/** An opaque description of a strided tensor: element type, dimensions, strides. */
typedef struct ffpaTensorStruct* ffpaTensorDescriptor_t;

/**
 * Creates an empty tensor descriptor; set it with ffpaSetTensorDescriptor() before use.
 * Needs no device.
 * @param[out] desc Receives the descriptor; set to NULL on failure.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER.
 */
FFPA_API ffpaStatus_t ffpaCreateTensorDescriptor(ffpaTensorDescriptor_t* desc);

/**
 * Destroys a tensor descriptor.
 * @param desc The descriptor, or NULL (then nothing happens).
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaDestroyTensorDescriptor(ffpaTensorDescriptor_t desc);

/**
 * Sets a tensor descriptor.
 *
 * Attention tensors have 4 dimensions in the order `[B, H, N, D]` (batch, heads, sequence,
 * head dimension) whatever their memory layout: `BHND` and `BNHD` storage differ only in
 * strides. The log-sum-exp tensor has 3 dimensions `[B, H, N]`. Strides are in elements and
 * may leave gaps (padded rows, a slice of a fused QKV buffer) but must not make two elements
 * overlap. The attention calls check the role of each tensor (for example unit stride on D).
 *
 * @param desc     The descriptor.
 * @param dataType Element type.
 * @param nbDims   Number of dimensions, 3 or 4.
 * @param dims     @p nbDims extents, each from 1 to 2^31 - 1.
 * @param strides  @p nbDims strides in elements, each at least 1 (any value for an extent of 1);
 *                 NULL means packed row-major (the last dimension contiguous). Sorted by size,
 *                 each stride must exceed the span of the dimensions with smaller strides: every
 *                 dense, padded or sliced layout does; interleaved ones are refused.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for @p nbDims, a dimension or an unknown type;
 *         #FFPA_STATUS_BAD_PARAM_STRIDE for non-positive or overlapping strides, or a tensor
 *         spanning more than 2^62 bytes; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 *         On failure the descriptor is left unchanged.
 */
FFPA_API ffpaStatus_t ffpaSetTensorDescriptor(ffpaTensorDescriptor_t desc, ffpaDataType_t dataType,
                                              int32_t nbDims, const int64_t* dims,
                                              const int64_t* strides);

/**
 * Reads a tensor descriptor.
 * @param desc          The descriptor.
 * @param[out] dataType Receives the element type; may be NULL.
 * @param requested     Capacity of @p dims and @p strides (0 allowed).
 * @param[out] nbDims   Receives the number of dimensions; may be NULL.
 * @param[out] dims     Receives the first `min(requested, nbDims)` extents; may be NULL.
 * @param[out] strides  Receives as many strides; may be NULL.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NOT_FINALIZED for a descriptor never set;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for a negative @p requested;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaGetTensorDescriptor(ffpaTensorDescriptor_t desc, ffpaDataType_t* dataType,
                                              int32_t requested, int32_t* nbDims, int64_t* dims,
                                              int64_t* strides);

/** @} */

/* ============================================================================================ */
/** @defgroup attention Attention descriptor
 *  @{ */

/** Which keys a query may attend to. With `Nq` queries and `Nkv` keys, query `i` sees key `j`: */
typedef enum ffpaCausalMode FFPA_ENUM_TYPE {
  /** always (no mask; the default). */
  FFPA_CAUSAL_NONE = 0,
  /** when `j <= i`: the mask's diagonal starts at the top-left corner (PyTorch's `is_causal`). */
  FFPA_CAUSAL_TOP_LEFT = 1,
  /** when `j <= i + Nkv - Nq`: the diagonal ends at the bottom-right corner (FlashAttention 2's
   *  convention; the last query sees every key). With `Nq > Nkv` the first `Nq - Nkv` queries see
   *  no key: their output is 0 and their log-sum-exp is -infinity. */
  FFPA_CAUSAL_BOTTOM_RIGHT = 2,
  /** @cond FFPA_INTERNAL */
  FFPA_CAUSAL_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaCausalMode_t;

/** Attributes of an attention descriptor, set with ffpaSetAttentionAttribute(). */
typedef enum ffpaAttentionAttribute FFPA_ENUM_TYPE {
  /** `float`, finite and > 0: multiplies Q·Kᵀ before the softmax. Default `1 / sqrt(d_qk)`;
   *  reading it before it was set gives 0, meaning that default. */
  FFPA_ATTENTION_SOFTMAX_SCALE = 0,
  /** `int32_t` holding an #ffpaCausalMode_t; default #FFPA_CAUSAL_NONE. */
  FFPA_ATTENTION_CAUSAL_MODE = 1,
  /** `const int32_t*`, default NULL (every batch entry has all `Nkv` keys): a device pointer to
   *  `B` key counts, one per batch entry; batch entry `b` attends to keys `[0, L_b)` of K and V
   *  only (a KV cache filled to another length in each sequence: FlashAttention's `seqused_k`,
   *  cuDNN's padding mask on the keys). The value passed is the address of the pointer, its size
   *  `sizeof(const int32_t*)`; NULL detaches the counts. Each execute call reads the counts on
   *  the device, in stream order, so they may change between calls that share the pointer (in a
   *  CUDA graph, say); the pointer must stay valid while calls that use it run (planning reads no
   *  counts: runtime autotune times the problem with all `Nkv` keys). A count below 0
   *  counts as 0, one above `Nkv` as `Nkv`. Keys from `L_b` on never reach the results: they
   *  may hold anything, NaN included (K and V still need all `Nkv` rows allocated: the Hopper
   *  kernels load the rest of the 64-key tile holding an entry's last key, and discard it).
   *  Under #FFPA_CAUSAL_BOTTOM_RIGHT the diagonal ends at each entry's last key (query `i` sees
   *  key `j` when `j <= i + L_b - Nq`). A query that sees no key gets O = 0 and a log-sum-exp
   *  of -infinity. Not with attention slices (whose key ranges say which keys each sequence
   *  has) or context parallelism. The forward runs on the `mma.sync` kernels, the Hopper ones
   *  or the reference path, as does the backward, where keys past a count get dK = dV = 0. */
  FFPA_ATTENTION_KEY_LENGTHS = 2,
  /* Values from 100 are reserved for packed variable-length batches and attention sinks. */
  /** @cond FFPA_INTERNAL */
  FFPA_ATTENTION_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaAttentionAttribute_t;

/** An opaque description of an attention operation: scale and mask. The shapes come from the
 *  tensor descriptors passed with it: Q `[B, Hq, Nq, Dqk]`, K `[B, Hkv, Nkv, Dqk]`,
 *  V `[B, Hkv, Nkv, Dv]`, O `[B, Hq, Nq, Dv]`, log-sum-exp `[B, Hq, Nq]`; `Hq` must be a multiple
 *  of `Hkv` (grouped-query attention; `Hkv = 1` is multi-query attention). */
typedef struct ffpaAttentionStruct* ffpaAttentionDescriptor_t;

/**
 * Creates an attention descriptor with the defaults (scale `1/sqrt(d_qk)`, no mask).
 * @param[out] desc Receives the descriptor; set to NULL on failure.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER.
 */
FFPA_API ffpaStatus_t ffpaCreateAttentionDescriptor(ffpaAttentionDescriptor_t* desc);

/**
 * Destroys an attention descriptor.
 * @param desc The descriptor, or NULL (then nothing happens).
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaDestroyAttentionDescriptor(ffpaAttentionDescriptor_t desc);

/**
 * Sets one attribute of an attention descriptor.
 * @param desc  The descriptor.
 * @param attr  Which attribute.
 * @param value Pointer to the value, of the attribute's type.
 * @param size  `sizeof` the attribute's type (4 for both current attributes).
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE for a wrong @p size;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for an unknown attribute or a value out of range;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaSetAttentionAttribute(ffpaAttentionDescriptor_t desc,
                                                ffpaAttentionAttribute_t attr, const void* value,
                                                size_t size);

/**
 * Reads one attribute of an attention descriptor.
 * @param desc             The descriptor.
 * @param attr             Which attribute.
 * @param[out] value       Receives the value; may be NULL when @p size is 0.
 * @param size             Size of @p value in bytes; 0 only asks for the size.
 * @param[out] sizeWritten Receives the size of the attribute's type; may be NULL.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for an unknown attribute;
 *         #FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE for a wrong non-zero @p size;
 *         #FFPA_STATUS_BAD_PARAM_NULL_POINTER; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaGetAttentionAttribute(ffpaAttentionDescriptor_t desc,
                                                ffpaAttentionAttribute_t attr, void* value,
                                                size_t size, size_t* sizeWritten);

/** @} */

/* ============================================================================================ */
/** @defgroup slices Attention slices: packed sequences and flexible masks
 *
 * Many sequences of different lengths packed one after another into one tensor (no padding), or
 * one long sequence with a mask more complex than causal, are described by a list of *slices*:
 * each slice says that the queries of rows `[q0, q1)` attend to the keys `[k0, k1)` under one
 * #ffpaSliceMask_t. Attached to an attention descriptor with ffpaSetAttentionDescriptorSlices(),
 * the slices replace the causal mode as the mask of every forward and backward call made with it.
 *
 * Packed tensors are ordinary 4-D descriptors with one batch entry: `[T, H, D]` memory (token
 * major) is Q `[1, Hq, Tq, Dqk]` with strides `{Tq*Hq*Dqk, Dqk, Hq*Dqk, 1}`, and so on for K, V, O
 * and the gradients; log-sum-exp `[Tq, Hq]` memory is `[1, Hq, Tq]` with strides
 * `{Tq*Hq, 1, Hq}`. (A batch of B > 1 applies the same slices to each batch entry.)
 *
 * Variable-length batches are one slice per sequence (ffpaSetAttentionSlicesFromOffsets() builds
 * them from the usual offset arrays); document masks with a shared prefix, sliding windows and
 * block-sparse patterns are several slices per query range. A query row sees the union of the keys
 * its slices give it; slices must never give one row the same key twice (that would count the key
 * twice in the softmax), which ffpaSetAttentionSlices() checks exactly, row by row. A row no slice
 * gives a key gets O = 0 and LSE = -infinity, as from the forward; dQ of such a row, and dK and dV
 * of a key no row sees, are 0.
 *
 * The slice list is copied to the device of the handle it was created with when it is set (a
 * synchronous copy, like planning: not on the execute path). Attention descriptors keep the list
 * they were given: destroying or setting the slices object afterwards does not change them. A CUDA
 * graph captured with a descriptor reads that device copy: keep the descriptor alive, and its
 * slices attached, as long as the graph runs.
 *
 * The FFPA kernels serve sliced forwards and backwards, the sm80 ones on every GPU they run on
 * and the Hopper ones (#FFPA_POLICY_HOPPER_KERNELS) on compute capability 9.0: each tile of query
 * rows attends only to the key tiles its slices reach, and each tile of keys of the dK/dV pass to
 * the rows that see it.
 * With a context-parallel object on the same descriptor, the slices mask the whole sequence (the
 * `context_parallel` group).
 *  @{ */

/** How the keys of one slice are masked. With the slice's `nq = q1 - q0` queries and
 *  `nk = k1 - k0` keys, relative query `i = row - q0` sees relative key `j = key - k0`: */
typedef enum ffpaSliceMask FFPA_ENUM_TYPE {
  /** always. */
  FFPA_SLICE_MASK_FULL = 0,
  /** when `j <= i + nk - nq`: causal with the diagonal ending at the slice's bottom-right corner
   *  (the last query sees every key; #FFPA_CAUSAL_BOTTOM_RIGHT within the slice). */
  FFPA_SLICE_MASK_CAUSAL = 1,
  /** when `j >= i`: the mirror image, the diagonal starting at the top-left corner (the first
   *  query sees every key). */
  FFPA_SLICE_MASK_INVERSE_CAUSAL = 2,
  /** when both hold: a band; with `nq = nk` the diagonal alone. Sliding windows are built from
   *  this and the two above. */
  FFPA_SLICE_MASK_BICAUSAL = 3,
  /** @cond FFPA_INTERNAL */
  FFPA_SLICE_MASK_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaSliceMask_t;

/** The most slices one list holds (2^24). */
#define FFPA_MAX_SLICES 16777216

/** An opaque list of attention slices, bound to the device of the handle it was created with. */
typedef struct ffpaSlicesStruct* ffpaAttentionSlices_t;

/**
 * Creates an empty slice list for the device of @p handle.
 * @param handle      The handle; a handle from ffpaCreateForDevice() gives a list that can be
 *                    planned with (workspace queries, plan descriptions) but not executed.
 * @param[out] slices Receives the list; set to NULL on failure.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaCreateAttentionSlices(ffpaHandle_t handle, ffpaAttentionSlices_t* slices);

/**
 * Destroys a slice list. Attention descriptors it was attached to keep their copy.
 * @param slices The list, or NULL (then nothing happens).
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaDestroyAttentionSlices(ffpaAttentionSlices_t slices);

/**
 * Sets the slices from plain arrays (checked, then copied to the device; the arrays are not
 * kept). Slice `i` is queries `[queryRanges[2i], queryRanges[2i+1])`, keys
 * `[keyRanges[2i], keyRanges[2i+1])`, mask `masks[i]`.
 * @param slices      The list.
 * @param count       Number of slices, 1 to #FFPA_MAX_SLICES.
 * @param queryRanges `count` pairs `[q0, q1)` with `0 <= q0 < q1`.
 * @param keyRanges   `count` pairs `[k0, k1)` with `0 <= k0 < k1`.
 * @param masks       `count` #ffpaSliceMask_t values, or NULL for #FFPA_SLICE_MASK_FULL on all.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for a count, range or mask out of bounds (the
 *         message names the slice); #FFPA_STATUS_BAD_PARAM when two slices give a query row the
 *         same key (the message names both slices and the row); #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE;
 *         #FFPA_STATUS_EXECUTION_FAILED_CUDA when the copy to the device fails. On failure the
 *         list keeps its previous slices.
 */
FFPA_API ffpaStatus_t ffpaSetAttentionSlices(ffpaAttentionSlices_t slices, int32_t count,
                                             const int32_t* queryRanges, const int32_t* keyRanges,
                                             const int32_t* masks);

/**
 * Sets one slice per packed sequence, the variable-length batch of cumulative offsets (`cu_seqlens`):
 * sequence `s` has queries `[queryOffsets[s], queryOffsets[s+1])` and keys
 * `[keyOffsets[s], keyOffsets[s+1])`, all under @p mask. A sequence with no queries or no keys
 * gets no slice.
 * @param slices       The list.
 * @param sequences    Number of sequences, 1 to #FFPA_MAX_SLICES.
 * @param queryOffsets `sequences + 1` non-decreasing offsets from 0.
 * @param keyOffsets   As many for the keys, or NULL to use @p queryOffsets (self-attention).
 * @param mask         The mask of every sequence (#FFPA_SLICE_MASK_CAUSAL for causal language
 *                     models: the last query of a sequence sees all of its keys).
 * @return As ffpaSetAttentionSlices(); #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND names an offset that
 *         decreases or does not start at 0, or a batch of sequences all empty.
 */
FFPA_API ffpaStatus_t ffpaSetAttentionSlicesFromOffsets(ffpaAttentionSlices_t slices,
                                                        int32_t sequences,
                                                        const int32_t* queryOffsets,
                                                        const int32_t* keyOffsets,
                                                        ffpaSliceMask_t mask);

/**
 * Facts about a slice list, each output optional (NULL skips it).
 * @param slices            The list.
 * @param[out] count        Number of slices.
 * @param[out] queryExtent  One past the last query row any slice covers: Nq must be at least this
 *                          (Nq times the ranks, with context parallelism).
 * @param[out] keyExtent    One past the last key any slice covers: Nkv must be at least this
 *                          (Nkv times the ranks, with context parallelism).
 * @param[out] visiblePairs Number of (query, key) pairs the slices let attend (per batch entry
 *                          and head): the forward does `2 * visiblePairs * (Dqk + Dv)` FLOPs per
 *                          head.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NOT_FINALIZED for a list never set;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaGetAttentionSlicesInfo(ffpaAttentionSlices_t slices, int32_t* count,
                                                 int64_t* queryExtent, int64_t* keyExtent,
                                                 int64_t* visiblePairs);

/**
 * Attaches the current slices of a list to an attention descriptor (which keeps them), or
 * detaches them.
 * @param desc   The attention descriptor; its causal mode must stay #FFPA_CAUSAL_NONE while
 *               slices are attached (a call with both fails with #FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS).
 * @param slices A list that was set, or NULL to go back to the causal mode.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NOT_FINALIZED for a list never set;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaSetAttentionDescriptorSlices(ffpaAttentionDescriptor_t desc,
                                                       ffpaAttentionSlices_t slices);

/** @} */

/* ============================================================================================ */
/** @defgroup execute Workspace and execution
 *
 * Shared rules of the four functions below:
 *  - Q, K, V, O (and dO, dQ, dK, dV) share one data type: fp16, bf16, or fp32 (reference path
 *    only); the log-sum-exp tensor is fp32 `[B, Hq, Nq]`, natural logarithm of the softmax
 *    denominator of the scaled scores.
 *  - The last dimension (D) of Q, K, V, O and the gradients has stride 1; head dimensions are
 *    1 to #FFPA_MAX_HEAD_DIM; `Dv` may differ from `Dqk` (e.g. 576/512).
 *  - A gradient has the shape and type of its tensor (dQ of Q, ...); its strides may differ.
 *  - Tensor pointers are aligned to 16 bytes, the workspace to 256 bytes; outputs must not
 *    overlap inputs or each other (#FFPA_STATUS_BAD_PARAM names the pair).
 *  - The workspace may be NULL when its size is 0.
 *  - A call that fails has enqueued nothing and written nothing, except with an
 *    #FFPA_STATUS_EXECUTION_FAILED code: a launch that fails may follow others already enqueued.
 *
 *  @{ */

/**
 * Bytes of workspace ffpaAttentionForward() needs for this problem. Plans the problem (and
 * caches the plan), so this is also the way to take planning off the execute path.
 * @param handle       The handle.
 * @param attn         The attention descriptor.
 * @param qDesc        Q `[B, Hq, Nq, Dqk]`.
 * @param kDesc        K `[B, Hkv, Nkv, Dqk]`.
 * @param vDesc        V `[B, Hkv, Nkv, Dv]`.
 * @param oDesc        O `[B, Hq, Nq, Dv]`.
 * @param lseDesc      Log-sum-exp `[B, Hq, Nq]` fp32, or NULL when not wanted.
 * @param[out] bytes   Receives the size in bytes (may be 0).
 * @return #FFPA_STATUS_SUCCESS; a #FFPA_STATUS_BAD_PARAM code naming the faulty descriptor;
 *         a #FFPA_STATUS_NOT_SUPPORTED code when no kernel serves the problem with the handle's
 *         policies; on a handle with a device, #FFPA_STATUS_EXECUTION_FAILED_CUBLAS or
 *         #FFPA_STATUS_EXECUTION_FAILED_CUDA when preparing a library call fails.
 */
FFPA_API ffpaStatus_t ffpaGetAttentionForwardWorkspaceSize(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    ffpaTensorDescriptor_t kDesc, ffpaTensorDescriptor_t vDesc, ffpaTensorDescriptor_t oDesc,
    ffpaTensorDescriptor_t lseDesc, size_t* bytes);

/**
 * Attention forward: `O = softmax(scale * Q·Kᵀ + mask) · V`, and optionally
 * `LSE = log(sum(exp(scale * Q·Kᵀ + mask)))` per query row.
 *
 * Enqueues the work on the handle's stream; never allocates device memory or synchronizes.
 * A query row that sees no key (bottom-right causal with `Nq > Nkv`) gets O = 0 and
 * LSE = -infinity. NaN or infinity in an input propagates (#FFPA_POLICY_SANITY_CHECK reports it
 * as an error instead). In a query row it makes that row's O and LSE NaN, and only that row's; in
 * a key row, the rows that see that key. In a value row it reaches the rows that see its key and
 * may reach rows of the same tile that do not, a row that sees no key included (their weight 0
 * times a NaN or infinite value is NaN): which of those depends on the kernel and on the
 * reference path's chunking.
 *
 * @param handle         The handle.
 * @param attn           The attention descriptor.
 * @param qDesc          Descriptor of @p q.
 * @param q              Queries (device memory).
 * @param kDesc          Descriptor of @p k.
 * @param k              Keys (device memory).
 * @param vDesc          Descriptor of @p v.
 * @param v              Values (device memory).
 * @param oDesc          Descriptor of @p o.
 * @param o              Output (device memory).
 * @param lseDesc        Descriptor of @p lse, or NULL.
 * @param lse            Log-sum-exp output (device memory), NULL exactly when @p lseDesc is.
 * @param workspace      Device scratch of at least the queried size.
 * @param workspaceSize  Size of @p workspace in bytes.
 * @return #FFPA_STATUS_SUCCESS; a #FFPA_STATUS_BAD_PARAM code naming the argument (including
 *         #FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT for a small workspace); a
 *         #FFPA_STATUS_NOT_SUPPORTED code; #FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE for a handle
 *         from ffpaCreateForDevice(); a #FFPA_STATUS_EXECUTION_FAILED code when a launch fails.
 */
FFPA_API ffpaStatus_t ffpaAttentionForward(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    const void* q, ffpaTensorDescriptor_t kDesc, const void* k, ffpaTensorDescriptor_t vDesc,
    const void* v, ffpaTensorDescriptor_t oDesc, void* o, ffpaTensorDescriptor_t lseDesc,
    float* lse, void* workspace, size_t workspaceSize);

/**
 * Explains the plan of a forward problem: which kernel serves it, with which launch
 * configuration and workspace, and why the kernels tried before it do not. Plans (and caches)
 * like ffpaGetAttentionForwardWorkspaceSize(). The text has one `name: value` line per item:
 * `kernel`, `config`, `workspace` and one `skipped` line per kernel passed over.
 * @param handle       The handle.
 * @param attn         The attention descriptor.
 * @param qDesc        Q.
 * @param kDesc        K.
 * @param vDesc        V.
 * @param oDesc        O.
 * @param lseDesc      Log-sum-exp, or NULL.
 * @param buffer       Receives the text, NUL-terminated and truncated to fit; may be NULL when
 *                     @p size is 0.
 * @param size         Size of @p buffer in bytes.
 * @param[out] length  Receives the length of the whole text without the NUL (a value
 *                     `>= size` means it was truncated); may be NULL.
 * @return As ffpaGetAttentionForwardWorkspaceSize().
 */
FFPA_API ffpaStatus_t ffpaDescribeAttentionForwardPlan(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    ffpaTensorDescriptor_t kDesc, ffpaTensorDescriptor_t vDesc, ffpaTensorDescriptor_t oDesc,
    ffpaTensorDescriptor_t lseDesc, char* buffer, size_t size, size_t* length);

/**
 * Bytes of workspace ffpaAttentionBackward() needs for this problem (plans and caches it).
 * @param handle       The handle.
 * @param attn         The attention descriptor used for the forward.
 * @param qDesc        Q.
 * @param kDesc        K.
 * @param vDesc        V.
 * @param oDesc        O, the forward's output.
 * @param doDesc       dO, the gradient of O.
 * @param lseDesc      Log-sum-exp from the forward (required).
 * @param dqDesc       dQ.
 * @param dkDesc       dK.
 * @param dvDesc       dV.
 * @param[out] bytes   Receives the size in bytes.
 * @return As ffpaGetAttentionForwardWorkspaceSize().
 */
FFPA_API ffpaStatus_t ffpaGetAttentionBackwardWorkspaceSize(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    ffpaTensorDescriptor_t kDesc, ffpaTensorDescriptor_t vDesc, ffpaTensorDescriptor_t oDesc,
    ffpaTensorDescriptor_t doDesc, ffpaTensorDescriptor_t lseDesc, ffpaTensorDescriptor_t dqDesc,
    ffpaTensorDescriptor_t dkDesc, ffpaTensorDescriptor_t dvDesc, size_t* bytes);

/**
 * Explains the plan of a backward problem, as ffpaDescribeAttentionForwardPlan() does for the
 * forward.
 * @param handle       The handle.
 * @param attn         The attention descriptor used for the forward.
 * @param qDesc        Q.
 * @param kDesc        K.
 * @param vDesc        V.
 * @param oDesc        O.
 * @param doDesc       dO.
 * @param lseDesc      Log-sum-exp (required).
 * @param dqDesc       dQ.
 * @param dkDesc       dK.
 * @param dvDesc       dV.
 * @param buffer       Receives the text; may be NULL when @p size is 0.
 * @param size         Size of @p buffer in bytes.
 * @param[out] length  Receives the length of the whole text; may be NULL.
 * @return As ffpaGetAttentionBackwardWorkspaceSize().
 */
FFPA_API ffpaStatus_t ffpaDescribeAttentionBackwardPlan(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    ffpaTensorDescriptor_t kDesc, ffpaTensorDescriptor_t vDesc, ffpaTensorDescriptor_t oDesc,
    ffpaTensorDescriptor_t doDesc, ffpaTensorDescriptor_t lseDesc, ffpaTensorDescriptor_t dqDesc,
    ffpaTensorDescriptor_t dkDesc, ffpaTensorDescriptor_t dvDesc, char* buffer, size_t size,
    size_t* length);

/**
 * Attention backward: dQ, dK and dV from Q, K, V, the forward's O and log-sum-exp, and dO.
 * With grouped-query attention, dK and dV of a K/V head sum the contributions of all query heads
 * of its group. Gradients are accumulated in fp32 and written once. Rows of dQ for queries that
 * see no key, and rows of dK and dV for keys no query sees, are exactly 0. Enqueues the work on
 * the handle's stream; never allocates device memory or synchronizes.
 *
 * @param handle         The handle.
 * @param attn           The attention descriptor used for the forward.
 * @param qDesc          Descriptor of @p q.
 * @param q              Queries.
 * @param kDesc          Descriptor of @p k.
 * @param k              Keys.
 * @param vDesc          Descriptor of @p v.
 * @param v              Values.
 * @param oDesc          Descriptor of @p o.
 * @param o              The forward's output.
 * @param doDesc         Descriptor of @p dO.
 * @param dO             Gradient of the output.
 * @param lseDesc        Descriptor of @p lse.
 * @param lse            The forward's log-sum-exp.
 * @param dqDesc         Descriptor of @p dq.
 * @param dq             Receives the gradient of Q.
 * @param dkDesc         Descriptor of @p dk.
 * @param dk             Receives the gradient of K.
 * @param dvDesc         Descriptor of @p dv.
 * @param dv             Receives the gradient of V.
 * @param workspace      Device scratch of at least the queried size.
 * @param workspaceSize  Size of @p workspace in bytes.
 * @return As ffpaAttentionForward().
 */
FFPA_API ffpaStatus_t ffpaAttentionBackward(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    const void* q, ffpaTensorDescriptor_t kDesc, const void* k, ffpaTensorDescriptor_t vDesc,
    const void* v, ffpaTensorDescriptor_t oDesc, const void* o, ffpaTensorDescriptor_t doDesc,
    const void* dO, ffpaTensorDescriptor_t lseDesc, const float* lse,
    ffpaTensorDescriptor_t dqDesc, void* dq, ffpaTensorDescriptor_t dkDesc, void* dk,
    ffpaTensorDescriptor_t dvDesc, void* dv, void* workspace, size_t workspaceSize);

/** @} */

/* ============================================================================================ */
/** @defgroup merge Merging partial results, attention sinks
 *
 * Attention over keys split into disjoint parts (sequence chunks, the shards of context
 * parallelism, mask slices) gives one partial result per part: an output `O_i` normalised over the
 * part's keys alone and its log-sum-exp `LSE_i`. ffpaAttentionMerge() combines them into the
 * result over all the keys, exactly up to rounding:
 *
 *     LSE = m + log(sum_i exp(LSE_i - m)),  m = max_i LSE_i
 *     O   = sum_i exp(LSE_i - LSE) * O_i
 *
 * in fp32 whatever the element types. A part with `LSE_i = -infinity` (no key of it seen by the
 * row) weighs 0 and its `O_i` is not read; a row no part sees gets O = 0 and LSE = -infinity, as
 * from the forward. NaN in an `LSE_i`, or `+infinity`, makes the row's O and LSE NaN.
 *
 * Keeping the partial outputs in fp32 (an fp32 @p partialODesc) avoids rounding each partial to
 * 16 bits before the sum: the high-precision reduction of distributed attention. The output type
 * is independent of the partials' type.
 *
 * An attention sink (a per-head logit `s` that joins the softmax denominator with no value) is one
 * more partial with `O_i = 0` and `LSE_i = s`: ffpaAttentionApplySinks() folds it into a result,
 * ffpaAttentionSinksBackward() gives its gradient.
 *  @{ */

/** The most partial results one ffpaAttentionMerge() call combines; merge merged results to
 *  combine more (the merge is associative). */
#define FFPA_MAX_MERGE_PARTIALS 32

/**
 * Merges partial attention results over disjoint key sets: see @ref merge for the formula.
 *
 * All partials share one layout, described once: they may be slices of one `[P, B, H, N, D]`
 * buffer or separate buffers of the same strides. Any fp16, bf16 or fp32 types for the partial
 * outputs and for @p o; log-sum-exp tensors are fp32. Pointers need the alignment of their element
 * type only (with D, the row strides and the pointers all allowing 4-element accesses, the kernel
 * takes a faster path). The outputs must not overlap the inputs, with one exception that lets a running result be
 * updated in place: @p o may be one of the @p partialO pointers when @p oDesc has the type, shape
 * and strides of @p partialODesc, and @p lse one of the @p partialLse pointers when @p lseDesc has
 * the strides of @p partialLseDesc.
 *
 * Enqueues one kernel on the handle's stream; never allocates device memory or synchronizes, so
 * it can be captured in a CUDA graph. Ignores the handle's policies.
 *
 * @param handle          The handle.
 * @param count           Number of partial results, 1 to #FFPA_MAX_MERGE_PARTIALS (1 converts or
 *                        copies).
 * @param partialODesc    Layout of every partial output, `[B, H, N, D]`, unit stride on D,
 *                        D from 1 to #FFPA_MAX_HEAD_DIM.
 * @param partialO        Host array of @p count device pointers, the partial outputs.
 * @param partialLseDesc  Layout of every partial log-sum-exp, `[B, H, N]` fp32.
 * @param partialLse      Host array of @p count device pointers, the partial log-sum-exps.
 * @param oDesc           The merged output, `[B, H, N, D]` like the partials, unit stride on D.
 * @param o               The merged output (device memory).
 * @param lseDesc         The merged log-sum-exp `[B, H, N]` fp32, or NULL when not wanted.
 * @param lse             The merged log-sum-exp (device memory), NULL exactly when @p lseDesc is.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for @p count;
 *         #FFPA_STATUS_BAD_PARAM_NULL_POINTER for a missing pointer (naming its index);
 *         #FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, #FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH or
 *         #FFPA_STATUS_BAD_PARAM_STRIDE naming the descriptor;
 *         #FFPA_STATUS_BAD_PARAM_NOT_FINALIZED or #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE for a
 *         descriptor never set or not live;
 *         #FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER; #FFPA_STATUS_BAD_PARAM for overlapping
 *         outputs; #FFPA_STATUS_NOT_SUPPORTED_SHAPE for D above #FFPA_MAX_HEAD_DIM;
 *         #FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE for a handle from ffpaCreateForDevice();
 *         #FFPA_STATUS_EXECUTION_FAILED_CUDA when the launch fails.
 */
FFPA_API ffpaStatus_t ffpaAttentionMerge(ffpaHandle_t handle, int32_t count,
                                         ffpaTensorDescriptor_t partialODesc,
                                         const void* const* partialO,
                                         ffpaTensorDescriptor_t partialLseDesc,
                                         const float* const* partialLse,
                                         ffpaTensorDescriptor_t oDesc, void* o,
                                         ffpaTensorDescriptor_t lseDesc, float* lse);

/**
 * Folds attention sinks into a forward result, in place: one fp32 logit `s_h` per head joins every
 * softmax denominator of that head with no value, so `LSE' = log(exp(LSE) + exp(s_h))` and
 * `O' = exp(LSE - LSE') * O` (the merge of the result with a part whose O is 0 and whose LSE is `s_h`). A row that sees no key
 * (O = 0, LSE = -infinity) gets O' = 0 and LSE' = `s_h`; a sink of -infinity changes nothing. Apply
 * it once to the final result (after any merge of partial results). For the backward, pass O' and
 * LSE' to ffpaAttentionBackward(): dQ, dK and dV need nothing more; ffpaAttentionSinksBackward()
 * gives the sinks' gradient.
 *
 * Enqueues one kernel on the handle's stream; never allocates device memory or synchronizes.
 *
 * @param handle   The handle.
 * @param sinks    `H` fp32 logits in device memory (H = dimension 1 of @p oDesc), 4-byte aligned.
 * @param oDesc    The forward's output `[B, H, N, D]` (fp16, bf16 or fp32), unit stride on D.
 * @param o        The output (device memory), read and rewritten.
 * @param lseDesc  Its log-sum-exp `[B, H, N]` fp32.
 * @param lse      The log-sum-exp (device memory), read and rewritten.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, #FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH or
 *         #FFPA_STATUS_BAD_PARAM_STRIDE naming the descriptor;
 *         #FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER; #FFPA_STATUS_BAD_PARAM when @p sinks overlaps
 *         @p o or @p lse; #FFPA_STATUS_NOT_SUPPORTED_SHAPE for D above #FFPA_MAX_HEAD_DIM;
 *         #FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE for a handle from ffpaCreateForDevice();
 *         #FFPA_STATUS_EXECUTION_FAILED_CUDA when the launch fails.
 */
FFPA_API ffpaStatus_t ffpaAttentionApplySinks(ffpaHandle_t handle, const float* sinks,
                                              ffpaTensorDescriptor_t oDesc, void* o,
                                              ffpaTensorDescriptor_t lseDesc, float* lse);

/**
 * The gradient of the attention sinks, for the loss whose gradient of O' is dO:
 * `dsinks_h = -sum(exp(s_h - LSE'[b, h, n]) * rowsum(O'[b, h, n, :] * dO[b, h, n, :]))` over b and n,
 * from the sink-adjusted O' and LSE' of ffpaAttentionApplySinks(). Written, not accumulated; summed
 * in a fixed order (bit-identical from run to run). With context parallelism each rank's value is
 * the partial over its own queries: sum them across ranks (or average, as the training framework
 * expects).
 *
 * Enqueues one kernel on the handle's stream; never allocates device memory or synchronizes.
 *
 * @param handle   The handle.
 * @param sinks    `H` fp32 logits in device memory, 4-byte aligned.
 * @param oDesc    O' `[B, H, N, D]` (fp16, bf16 or fp32), unit stride on D.
 * @param o        O' (device memory).
 * @param doDesc   dO, the shape and type of O', unit stride on D.
 * @param dO       dO (device memory).
 * @param lseDesc  LSE' `[B, H, N]` fp32.
 * @param lse      LSE' (device memory).
 * @param dSinks   Receives the `H` fp32 gradients (device memory, 4-byte aligned).
 * @return As ffpaAttentionApplySinks(); #FFPA_STATUS_BAD_PARAM when @p dSinks overlaps an input.
 */
FFPA_API ffpaStatus_t ffpaAttentionSinksBackward(ffpaHandle_t handle, const float* sinks,
                                                 ffpaTensorDescriptor_t oDesc, const void* o,
                                                 ffpaTensorDescriptor_t doDesc, const void* dO,
                                                 ffpaTensorDescriptor_t lseDesc, const float* lse,
                                                 float* dSinks);

/** @} */

/* ============================================================================================ */
/** @defgroup context_parallel Context parallelism over NCCL
 *
 * A sequence too long for one GPU is sharded over the `P` ranks of an NCCL communicator: each
 * rank holds `n` of the `N = P * n` tokens of Q, K, V (and O, dO, the log-sum-exp and the
 * gradients). With a context-parallel object attached to the attention descriptor
 * (ffpaSetAttentionDescriptorContextParallel()), ffpaAttentionForward() and
 * ffpaAttentionBackward() on every rank, with descriptors of the **local** shards
 * (`[B, H, n, D]`), compute attention over the **whole** sequence:
 *
 * - the key/value blocks travel a ring (`ncclSend` to rank + 1, `ncclRecv` from rank - 1, in one
 *   group per step, on a stream of the object's own) while each rank computes its queries
 *   against the block it holds; each step's partial output is merged into an fp32 running result
 *   by its log-sum-exp, and written out in the tensors' type after the last step;
 * - the backward sends K/V around the ring again, with each block's dK/dV (fp32) travelling
 *   along and collecting every rank's contribution until they reach their home rank; each rank
 *   sums its dQ in fp32;
 * - the attention descriptor's causal mode is the mask over the whole sequence: any causal mode
 *   means "token i sees token j when j <= i" (Q and K/V are sharded alike, so local Nq = Nkv);
 *   FFPA_CAUSAL_NONE lets every token see every token (then local Nq and Nkv may differ), unless
 *   slices are attached (below);
 * - #FFPA_SHARDING_ZIGZAG balances causal work: the sequence is cut into `2P` chunks and rank
 *   `r` holds chunks `r` and `2P - 1 - r`, so that every rank computes the same number of
 *   visible pairs (ffpaGetContextParallelShard() says which tokens a rank holds).
 *
 * Every rank must make the same calls with the same shapes, in the same order (as with any NCCL
 * collective). The calls stay stream-ordered: they never synchronize the host and allocate
 * nothing (buffers come from the workspace, whose query accounts for them), so they can be
 * captured in a CUDA graph when the communicator allows it.
 *
 * Attention slices (the `slices` group) attached to the same descriptor mask the **whole**
 * sequence: their query rows and keys are global token positions (`0` to `P * n`, Nq or Nkv of
 * the local descriptors times `P`), in place of the causal mode (which must then be
 * FFPA_CAUSAL_NONE). Each rank cuts them into the slices of each ring step (its local queries
 * against the block it holds: one sliced call over the rows and keys those reach, none when the
 * step sees nothing) and copies those to the device, once per slice list and local shape: the
 * first call that meets them (the workspace query or plan description, which should come first,
 * or else the forward or backward itself) allocates and synchronizes like
 * ffpaSetAttentionSlices(). The cut lives as long as the list, so later calls with it, and CUDA
 * graphs captured with it, neither allocate nor synchronize. A row that sees no key over the whole
 * sequence gets O = 0 and LSE = -infinity, as in a plain sliced call.
 *
 * Attention sinks need no exchange: every rank holds whole rows, so each applies the sinks to its
 * own O and LSE (ffpaAttentionApplySinks()) after the forward and passes the adjusted ones to the
 * backward; ffpaAttentionSinksBackward() gives the share of the sinks' gradient its rows
 * contribute, and the sum over the ranks (e.g. `ncclAllReduce` with `ncclSum`, unless the
 * caller's framework already reduces parameter gradients over the ranks) is the whole gradient.
 *
 * Precision: each step's partial output is rounded to the tensors' type once before its merge
 * (in fp32); the backward rounds each step's dQ/dK/dV contribution to the tensors' type before
 * adding it in fp32. Errors stay within a few units of the last place of the output type.
 *
 * NCCL is optional at build time (Meson option `nccl`); without it ffpaCreateContextParallel()
 * returns #FFPA_STATUS_NOT_SUPPORTED, and ffpaGetBuildInfo() says `NCCL no`.
 *  @{ */

/** @cond FFPA_INTERNAL */
struct ncclComm; /* NCCL's communicator: ncclComm_t is `struct ncclComm*` */
/** @endcond */

/** An opaque context-parallel object: a rank's place in a ring, and its exchange stream. */
typedef struct ffpaContextParallelStruct* ffpaContextParallel_t;

/** How a sequence is sharded over the ranks (`n` tokens per rank, `P` ranks). */
typedef enum ffpaSharding_t FFPA_ENUM_TYPE {
  /** Rank `r` holds tokens `[r * n, (r + 1) * n)`. Under a causal mask the last rank computes
   *  `P` times as much as the first. */
  FFPA_SHARDING_CONTIGUOUS = 0,
  /** `2P` chunks of `n / 2` tokens; rank `r` holds chunk `r` then chunk `2P - 1 - r` (`n` even).
   *  Every rank computes the same share of a causal mask. */
  FFPA_SHARDING_ZIGZAG = 1,
  /** @cond FFPA_INTERNAL */
  FFPA_SHARDING_FORCE_INT32 = 0x7fffffff
  /** @endcond */
} ffpaSharding_t;

/**
 * Creates a context-parallel object for the calling rank of an NCCL communicator.
 *
 * Reads the rank and the number of ranks from @p comm, and creates a stream and four events on
 * the handle's device (so it allocates; do it once). The communicator must belong to the
 * handle's device (checked), be a blocking one (NCCL's default: not made with
 * `config.blocking = 0`) and outlive every call that uses the object; libffpa never destroys it.
 *
 * @param handle   A handle that executes (not made with ffpaCreateForDevice()).
 * @param[out] cp  Receives the object; set to NULL on failure.
 * @param comm     The caller's `ncclComm_t`.
 * @param sharding How the sequence is sharded: #FFPA_SHARDING_CONTIGUOUS or
 *                 #FFPA_SHARDING_ZIGZAG.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for an unknown @p sharding;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE; #FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE for a
 *         handle made for a described device; #FFPA_STATUS_BAD_PARAM when @p comm belongs to
 *         another device; #FFPA_STATUS_NOT_SUPPORTED for a library built without NCCL;
 *         #FFPA_STATUS_EXECUTION_FAILED_NCCL; #FFPA_STATUS_EXECUTION_FAILED_CUDA.
 */
FFPA_API ffpaStatus_t ffpaCreateContextParallel(ffpaHandle_t handle, ffpaContextParallel_t* cp,
                                                struct ncclComm* comm, ffpaSharding_t sharding);

/**
 * Creates a context-parallel object without a communicator, for rank @p rank of @p ranks: its
 * workspace sizes and plan descriptions are those of a real one, on any handle (also one made
 * with ffpaCreateForDevice()), but ffpaAttentionForward() and ffpaAttentionBackward() refuse it
 * with #FFPA_STATUS_NOT_SUPPORTED.
 * @param handle   The handle.
 * @param[out] cp  Receives the object; set to NULL on failure.
 * @param ranks    Number of ranks, 1 to 65536.
 * @param rank     This rank, 0 to @p ranks - 1.
 * @param sharding #FFPA_SHARDING_CONTIGUOUS or #FFPA_SHARDING_ZIGZAG.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaCreateContextParallelForDescription(ffpaHandle_t handle,
                                                              ffpaContextParallel_t* cp,
                                                              int32_t ranks, int32_t rank,
                                                              ffpaSharding_t sharding);

/**
 * Destroys a context-parallel object. Attention descriptors it is attached to keep what they
 * need (they stay usable); work already enqueued is not waited for.
 * @param cp The object, or NULL (then nothing happens).
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaDestroyContextParallel(ffpaContextParallel_t cp);

/**
 * Facts about a context-parallel object, each output optional (NULL skips it).
 * @param cp             The object.
 * @param[out] ranks     Number of ranks of the ring.
 * @param[out] rank      The object's rank.
 * @param[out] sharding  Its sharding.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaGetContextParallelInfo(ffpaContextParallel_t cp, int32_t* ranks,
                                                 int32_t* rank, ffpaSharding_t* sharding);

/**
 * The tokens of the whole sequence the object's rank holds, in local order: with @p localLength
 * tokens per rank, writes `count` (1 contiguous, 2 zigzag) half-open ranges `[begin, end)` of
 * global token indices to @p ranges as `begin0, end0, begin1, end1`.
 * @param cp            The object.
 * @param localLength   Tokens per rank (`n`), at least 1; even for zigzag sharding.
 * @param[out] ranges   Room for 4 values.
 * @param[out] count    Receives the number of ranges written.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH for an odd length with zigzag sharding;
 *         #FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND for a length below 1 or one whose sequence
 *         (`ranks * localLength`) exceeds 2^62; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaGetContextParallelShard(ffpaContextParallel_t cp, int64_t localLength,
                                                  int64_t* ranges, int32_t* count);

/**
 * Attaches a context-parallel object to an attention descriptor (the descriptor keeps a shared
 * reference), or detaches it with NULL. Attached, the descriptor's calls are those of one rank
 * of the ring; their descriptors describe the rank's shards.
 * @param desc The attention descriptor.
 * @param cp   The object, or NULL.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaSetAttentionDescriptorContextParallel(ffpaAttentionDescriptor_t desc,
                                                                ffpaContextParallel_t cp);

/** @} */

/* ============================================================================================ */
/** @defgroup plancache Plan cache
 *  @{ */

/** Counters of a handle's plan cache. Set @ref structSize before calling
 *  ffpaGetPlanCacheStats(). */
typedef struct ffpaPlanCacheStats {
  uint32_t structSize; /**< In: `sizeof(ffpaPlanCacheStats_t)` of the caller. */
  uint32_t reserved;   /**< Zero; keeps the counters 8-byte aligned in every language. */
  uint64_t hits;       /**< Lookups that found a plan. */
  uint64_t misses;     /**< Lookups that had to plan. */
  uint64_t evictions;  /**< Plans dropped because the cache was full. */
  uint64_t size;       /**< Plans held now. */
  uint64_t capacity;   /**< Plans it may hold (#FFPA_POLICY_PLAN_CACHE_CAPACITY). */
} ffpaPlanCacheStats_t;

/**
 * Reads the plan-cache counters of a handle.
 * @param handle     The handle.
 * @param[out] stats Filled up to its @c structSize.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT; #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaGetPlanCacheStats(ffpaHandle_t handle, ffpaPlanCacheStats_t* stats);

/**
 * Drops every cached plan of a handle and resets its counters. Calls in flight on other threads
 * keep the plans they hold.
 * @param handle The handle.
 * @return #FFPA_STATUS_SUCCESS; #FFPA_STATUS_BAD_PARAM_NULL_POINTER;
 *         #FFPA_STATUS_BAD_PARAM_INVALID_HANDLE.
 */
FFPA_API ffpaStatus_t ffpaClearPlanCache(ffpaHandle_t handle);

/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FFPA_FFPA_H */
