package ffpa

// #include <ffpa/ffpa.h>
// #include <stdlib.h>
import "C"

import (
	"strconv"
	"strings"
	"unsafe"
)

// Knob names one runtime policy of a handle (ffpaPolicyKnob_t). [PolicyInfoOf]
// describes each knob: its type, bounds, default and environment variables.
type Knob int32

// The knobs of ffpa.h, with the same values. The header documents each one.
const (
	KnobAccumulator               Knob = C.FFPA_POLICY_ACCUMULATOR
	KnobPrefetchQKV               Knob = C.FFPA_POLICY_PREFETCH_QKV
	KnobQKVSmemShare              Knob = C.FFPA_POLICY_QKV_SMEM_SHARE
	KnobSmemSwizzleQ              Knob = C.FFPA_POLICY_SMEM_SWIZZLE_Q
	KnobSmemSwizzleK              Knob = C.FFPA_POLICY_SMEM_SWIZZLE_K
	KnobSmemSwizzleV              Knob = C.FFPA_POLICY_SMEM_SWIZZLE_V
	KnobPersistQG2S               Knob = C.FFPA_POLICY_PERSIST_Q_G2S
	KnobPersistKVG2S              Knob = C.FFPA_POLICY_PERSIST_KV_G2S
	KnobPersistQS2R               Knob = C.FFPA_POLICY_PERSIST_Q_S2R
	KnobPersistVS2R               Knob = C.FFPA_POLICY_PERSIST_V_S2R
	KnobRegistersPipeKV           Knob = C.FFPA_POLICY_REGISTERS_PIPE_KV
	KnobLaunchGridDNHB            Knob = C.FFPA_POLICY_LAUNCH_GRID_DNHB
	KnobStages                    Knob = C.FFPA_POLICY_STAGES
	KnobHopperKernels             Knob = C.FFPA_POLICY_HOPPER_KERNELS
	KnobExp2Emulation             Knob = C.FFPA_POLICY_EXP2_EMULATION
	KnobHopperKvMulticast         Knob = C.FFPA_POLICY_HOPPER_KV_MULTICAST
	KnobQueryHeadsAsRows          Knob = C.FFPA_POLICY_QUERY_HEADS_AS_ROWS
	KnobKeySplits                 Knob = C.FFPA_POLICY_KEY_SPLITS
	KnobAutotune                  Knob = C.FFPA_POLICY_AUTOTUNE
	KnobAutotuneMode              Knob = C.FFPA_POLICY_AUTOTUNE_MODE
	KnobTunedConfigDir            Knob = C.FFPA_POLICY_TUNED_CONFIG_DIR
	KnobSkipPersistentTunedConfig Knob = C.FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG
	KnobDeterministic             Knob = C.FFPA_POLICY_DETERMINISTIC
	KnobSanityCheck               Knob = C.FFPA_POLICY_SANITY_CHECK
	KnobReferenceBackend          Knob = C.FFPA_POLICY_REFERENCE_BACKEND
	KnobReferenceChunkBytes       Knob = C.FFPA_POLICY_REFERENCE_CHUNK_BYTES
	KnobPlanCacheCapacity         Knob = C.FFPA_POLICY_PLAN_CACHE_CAPACITY
	KnobLogLevel                  Knob = C.FFPA_POLICY_LOG_LEVEL
)

// String returns the knob's name as the library spells it, for example
// "FFPA_POLICY_STAGES", or "Knob(N)" for a knob this library does not know.
func (k Knob) String() string {
	info, err := PolicyInfoOf(k)
	if err != nil {
		return "Knob(" + strconv.Itoa(int(k)) + ")"
	}
	return info.Name
}

// PolicyType is the value type of a knob (ffpaPolicyType_t); it decides which
// of the typed setters and getters of [Handle] apply.
type PolicyType int32

// The policy value types.
const (
	PolicyTypeBool   PolicyType = C.FFPA_POLICY_TYPE_BOOL   // SetPolicyBool, PolicyBool
	PolicyTypeInt32  PolicyType = C.FFPA_POLICY_TYPE_INT32  // SetPolicyInt32, PolicyInt32
	PolicyTypeInt64  PolicyType = C.FFPA_POLICY_TYPE_INT64  // SetPolicyInt64, PolicyInt64
	PolicyTypeEnum   PolicyType = C.FFPA_POLICY_TYPE_ENUM   // SetPolicyEnum, PolicyEnum
	PolicyTypeString PolicyType = C.FFPA_POLICY_TYPE_STRING // SetPolicyString, PolicyString
)

// PolicySource tells where the current value of a knob comes from.
type PolicySource int32

// The policy sources, in increasing precedence.
const (
	SourceDefault     PolicySource = C.FFPA_POLICY_SOURCE_DEFAULT     // the built-in default
	SourceEnvironment PolicySource = C.FFPA_POLICY_SOURCE_ENVIRONMENT // a variable read when the handle was created
	SourceSetter      PolicySource = C.FFPA_POLICY_SOURCE_SETTER      // a SetPolicy* call on the handle
)

// String returns "default", "environment" or "setter".
func (s PolicySource) String() string {
	switch s {
	case SourceDefault:
		return "default"
	case SourceEnvironment:
		return "environment"
	case SourceSetter:
		return "setter"
	}
	return "PolicySource(" + strconv.Itoa(int(s)) + ")"
}

// Accumulator is the value type of KnobAccumulator (ffpaAccumulator_t).
type Accumulator int32

// The accumulator precisions; pass them to SetPolicyEnum as int32.
const (
	AccumulatorF32   Accumulator = C.FFPA_ACCUMULATOR_F32
	AccumulatorQKF16 Accumulator = C.FFPA_ACCUMULATOR_QK_F16
	AccumulatorPVF16 Accumulator = C.FFPA_ACCUMULATOR_PV_F16
	AccumulatorF16   Accumulator = C.FFPA_ACCUMULATOR_F16
)

// AutotuneMode is the value type of KnobAutotuneMode (ffpaAutotuneMode_t).
type AutotuneMode int32

// The autotuning search spaces; pass them to SetPolicyEnum as int32.
const (
	AutotuneFast AutotuneMode = C.FFPA_AUTOTUNE_MODE_FAST
	AutotuneMax  AutotuneMode = C.FFPA_AUTOTUNE_MODE_MAX
)

// PolicyInfo describes one knob (ffpaPolicyInfo_t).
type PolicyInfo struct {
	Knob          Knob       // the knob described
	Type          PolicyType // which typed setter applies
	Min           int64      // smallest accepted value (0 for strings)
	Max           int64      // largest accepted value (the longest length for strings)
	Default       int64      // value without setter or environment (numeric types)
	Name          string     // the enumerator's name, e.g. "FFPA_POLICY_STAGES"
	Environment   []string   // variables read when a handle is created, primary first
	ValueNames    []string   // names of the values from Min up (booleans and enumerations)
	DefaultString string     // the default as text
	Description   string     // one sentence
}

// PolicyInfoOf describes a knob; it needs no handle.
func PolicyInfoOf(k Knob) (PolicyInfo, error) {
	var c C.ffpaPolicyInfo_t
	c.structSize = C.uint32_t(unsafe.Sizeof(c))
	if err := call(func() C.ffpaStatus_t { return C.ffpaGetPolicyInfo(C.ffpaPolicyKnob_t(k), &c) }); err != nil {
		return PolicyInfo{}, err
	}
	return PolicyInfo{
		Knob:          k,
		Type:          PolicyType(c._type),
		Min:           int64(c.minValue),
		Max:           int64(c.maxValue),
		Default:       int64(c.defaultValue),
		Name:          C.GoString(c.name),
		Environment:   strings.Fields(C.GoString(c.environment)),
		ValueNames:    strings.Fields(C.GoString(c.valueNames)),
		DefaultString: C.GoString(c.defaultString),
		Description:   C.GoString(c.description),
	}, nil
}

// Knobs lists every knob the loaded library knows, in increasing order.
func Knobs() ([]Knob, error) {
	var n C.int32_t
	if err := call(func() C.ffpaStatus_t { return C.ffpaGetPolicyKnobs(0, &n, nil) }); err != nil {
		return nil, err
	}
	knobs := make([]Knob, int(n))
	if n == 0 {
		return knobs, nil
	}
	ptr := (*C.ffpaPolicyKnob_t)(unsafe.Pointer(&knobs[0])) // Knob and the C enum are both 32 bits
	if err := call(func() C.ffpaStatus_t { return C.ffpaGetPolicyKnobs(n, &n, ptr) }); err != nil {
		return nil, err
	}
	return knobs[:int(n)], nil
}

// setPolicy passes a value of the knob's C type; the size tells the library the
// type, which it checks against the knob's.
func (h *Handle) setPolicy(k Knob, value unsafe.Pointer, size uintptr) error {
	return call(func() C.ffpaStatus_t {
		return C.ffpaSetPolicy(h.h, C.ffpaPolicyKnob_t(k), value, C.size_t(size))
	})
}

func (h *Handle) getPolicy(k Knob, value unsafe.Pointer, size uintptr) error {
	return call(func() C.ffpaStatus_t {
		return C.ffpaGetPolicy(h.h, C.ffpaPolicyKnob_t(k), value, C.size_t(size), nil)
	})
}

// SetPolicyBool sets a boolean knob.
func (h *Handle) SetPolicyBool(k Knob, v bool) error {
	var c C.int32_t
	if v {
		c = 1
	}
	return h.setPolicy(k, unsafe.Pointer(&c), unsafe.Sizeof(c))
}

// SetPolicyInt32 sets an int32 knob.
func (h *Handle) SetPolicyInt32(k Knob, v int32) error {
	c := C.int32_t(v)
	return h.setPolicy(k, unsafe.Pointer(&c), unsafe.Sizeof(c))
}

// SetPolicyInt64 sets an int64 knob.
func (h *Handle) SetPolicyInt64(k Knob, v int64) error {
	c := C.int64_t(v)
	return h.setPolicy(k, unsafe.Pointer(&c), unsafe.Sizeof(c))
}

// SetPolicyEnum sets an enumeration knob, for example
// h.SetPolicyEnum(KnobLogLevel, int32(LogDebug)).
func (h *Handle) SetPolicyEnum(k Knob, v int32) error {
	return h.SetPolicyInt32(k, v)
}

// SetPolicyString sets a string knob. A value with a NUL byte is refused here,
// since C would silently cut it there.
func (h *Handle) SetPolicyString(k Knob, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return &Error{Status: StatusBadParam, Message: "SetPolicyString: " + k.String() + ": the value contains a NUL byte"}
	}
	c := C.CString(v)
	defer C.free(unsafe.Pointer(c))
	return h.setPolicy(k, unsafe.Pointer(c), uintptr(len(v)+1))
}

// PolicyBool reads a boolean knob.
func (h *Handle) PolicyBool(k Knob) (bool, error) {
	var c C.int32_t
	err := h.getPolicy(k, unsafe.Pointer(&c), unsafe.Sizeof(c))
	return c != 0, err
}

// PolicyInt32 reads an int32 knob.
func (h *Handle) PolicyInt32(k Knob) (int32, error) {
	var c C.int32_t
	err := h.getPolicy(k, unsafe.Pointer(&c), unsafe.Sizeof(c))
	return int32(c), err
}

// PolicyInt64 reads an int64 knob.
func (h *Handle) PolicyInt64(k Knob) (int64, error) {
	var c C.int64_t
	err := h.getPolicy(k, unsafe.Pointer(&c), unsafe.Sizeof(c))
	return int64(c), err
}

// PolicyEnum reads an enumeration knob.
func (h *Handle) PolicyEnum(k Knob) (int32, error) {
	return h.PolicyInt32(k)
}

// PolicyString reads a string knob.
func (h *Handle) PolicyString(k Knob) (string, error) {
	for {
		var size C.size_t // the length with its NUL
		if err := call(func() C.ffpaStatus_t {
			return C.ffpaGetPolicy(h.h, C.ffpaPolicyKnob_t(k), nil, 0, &size)
		}); err != nil {
			return "", err
		}
		buf := make([]byte, int(size)+1)
		err := h.getPolicy(k, unsafe.Pointer(&buf[0]), uintptr(len(buf)))
		if e, ok := err.(*Error); ok && e.Status == StatusBadParamSizeInsufficient {
			continue // another goroutine set a longer value in between
		}
		if err != nil {
			return "", err
		}
		return C.GoString((*C.char)(unsafe.Pointer(&buf[0]))), nil
	}
}

// PolicySource tells where the current value of a knob comes from.
func (h *Handle) PolicySource(k Knob) (PolicySource, error) {
	var s C.ffpaPolicySource_t
	err := call(func() C.ffpaStatus_t { return C.ffpaGetPolicySource(h.h, C.ffpaPolicyKnob_t(k), &s) })
	return PolicySource(s), err
}
