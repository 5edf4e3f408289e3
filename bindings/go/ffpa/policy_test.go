package ffpa

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// allKnobs lists the constants of this package; the library must know each.
var allKnobs = []Knob{
	KnobAccumulator, KnobPrefetchQKV, KnobQKVSmemShare, KnobSmemSwizzleQ, KnobSmemSwizzleK,
	KnobSmemSwizzleV, KnobPersistQG2S, KnobPersistKVG2S, KnobPersistQS2R, KnobPersistVS2R,
	KnobRegistersPipeKV, KnobLaunchGridDNHB, KnobStages, KnobHopperKernels, KnobExp2Emulation,
	KnobHopperKvMulticast, KnobQueryHeadsAsRows, KnobKeySplits, KnobAutotune, KnobAutotuneMode,
	KnobTunedConfigDir, KnobSkipPersistentTunedConfig, KnobDeterministic, KnobSanityCheck,
	KnobReferenceBackend, KnobReferenceChunkBytes, KnobPlanCacheCapacity, KnobLogLevel,
}

func TestKnobsAndTheirInfo(t *testing.T) {
	knobs, err := Knobs()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(knobs, allKnobs) {
		t.Errorf("Knobs() = %v, want %v", knobs, allKnobs)
	}
	for _, k := range knobs {
		info, err := PolicyInfoOf(k)
		if err != nil {
			t.Fatalf("PolicyInfoOf(%d): %v", int32(k), err)
		}
		if info.Knob != k || !strings.HasPrefix(info.Name, "FFPA_POLICY_") || k.String() != info.Name ||
			info.Description == "" || len(info.Environment) == 0 || info.Min > info.Max {
			t.Errorf("PolicyInfoOf(%v) = %+v", k, info)
		}
	}
	stages, _ := PolicyInfoOf(KnobStages)
	if stages.Type != PolicyTypeInt32 || stages.Min != 0 || stages.Max != 4 || stages.Environment[0] != "FFPA_STAGES" {
		t.Errorf("stages: %+v", stages)
	}
	level, _ := PolicyInfoOf(KnobLogLevel)
	if level.Type != PolicyTypeEnum || !reflect.DeepEqual(level.ValueNames, []string{"off", "error", "warning", "info", "debug"}) ||
		level.Default != int64(LogWarning) {
		t.Errorf("log level: %+v", level)
	}
	_, err = PolicyInfoOf(Knob(9999))
	wantError(t, err, StatusBadParamOutOfBound)
	if got := Knob(9999).String(); got != "Knob(9999)" {
		t.Errorf("String of an unknown knob: %q", got)
	}
}

func TestPolicyRoundTripsAndSources(t *testing.T) {
	h := describedHandle(t)
	source := func(k Knob) PolicySource {
		t.Helper()
		s, err := h.PolicySource(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, k := range allKnobs {
		if s := source(k); s != SourceDefault {
			t.Errorf("%v comes from %v before any setter", k, s)
		}
	}

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.SetPolicyBool(KnobPrefetchQKV, false))
	must(h.SetPolicyInt32(KnobStages, 3))
	must(h.SetPolicyInt64(KnobReferenceChunkBytes, 1<<20))
	must(h.SetPolicyEnum(KnobAccumulator, int32(AccumulatorQKF16)))
	must(h.SetPolicyString(KnobTunedConfigDir, "/opt/ffpa/tuned"))

	if v, err := h.PolicyBool(KnobPrefetchQKV); err != nil || v {
		t.Errorf("PolicyBool = %v, %v", v, err)
	}
	if v, err := h.PolicyInt32(KnobStages); err != nil || v != 3 {
		t.Errorf("PolicyInt32 = %v, %v", v, err)
	}
	if v, err := h.PolicyInt64(KnobReferenceChunkBytes); err != nil || v != 1<<20 {
		t.Errorf("PolicyInt64 = %v, %v", v, err)
	}
	if v, err := h.PolicyEnum(KnobAccumulator); err != nil || Accumulator(v) != AccumulatorQKF16 {
		t.Errorf("PolicyEnum = %v, %v", v, err)
	}
	if v, err := h.PolicyString(KnobTunedConfigDir); err != nil || v != "/opt/ffpa/tuned" {
		t.Errorf("PolicyString = %q, %v", v, err)
	}
	for _, k := range []Knob{KnobPrefetchQKV, KnobStages, KnobReferenceChunkBytes, KnobAccumulator, KnobTunedConfigDir} {
		if s := source(k); s != SourceSetter {
			t.Errorf("%v comes from %v after its setter", k, s)
		}
	}
	if s := source(KnobLogLevel); s.String() != "default" {
		t.Errorf("PolicySource.String() = %q", s)
	}
}

func TestPolicyErrorsNameTheKnob(t *testing.T) {
	h := describedHandle(t)
	wantError(t, h.SetPolicyInt32(KnobStages, 7), StatusBadParamOutOfBound, "FFPA_POLICY_STAGES", "7")
	// An int64 for an int32 knob: the size tells the library the type is wrong.
	wantError(t, h.SetPolicyInt64(KnobStages, 1), StatusBadParamAttributeType, "FFPA_POLICY_STAGES")
	wantError(t, h.SetPolicyInt32(KnobReferenceChunkBytes, 1), StatusBadParamAttributeType)
	wantError(t, h.SetPolicyEnum(KnobLogLevel, 9), StatusBadParamOutOfBound, "FFPA_POLICY_LOG_LEVEL")
	wantError(t, h.SetPolicyString(KnobTunedConfigDir, "a\x00b"), StatusBadParam, "NUL")
	wantError(t, h.SetPolicyBool(Knob(9999), true), StatusBadParamOutOfBound)
	_, err := h.PolicyInt64(KnobStages)
	wantError(t, err, StatusBadParamAttributeType)
	if v, _ := h.PolicyInt32(KnobStages); v != 0 {
		t.Errorf("a refused value was stored: %d", v)
	}
}

func TestPolicyFromEnvironment(t *testing.T) {
	t.Setenv("FFPA_STAGES", "2")
	t.Setenv("FFPA_LOGGER_LEVEL", "info")
	t.Setenv("FFPA_TUNED_CONFIG_DIR", "/srv/tuned")
	h := describedHandle(t)
	if v, err := h.PolicyInt32(KnobStages); err != nil || v != 2 {
		t.Errorf("stages = %d, %v", v, err)
	}
	if v, err := h.PolicyEnum(KnobLogLevel); err != nil || LogLevel(v) != LogInfo {
		t.Errorf("log level = %v, %v", LogLevel(v), err)
	}
	if v, err := h.PolicyString(KnobTunedConfigDir); err != nil || v != "/srv/tuned" {
		t.Errorf("tuned config dir = %q, %v", v, err)
	}
	for _, k := range []Knob{KnobStages, KnobLogLevel, KnobTunedConfigDir} {
		if s, _ := h.PolicySource(k); s != SourceEnvironment {
			t.Errorf("%v comes from %v", k, s)
		}
	}
	if err := h.SetPolicyInt32(KnobStages, 1); err != nil {
		t.Fatal(err)
	}
	if s, _ := h.PolicySource(KnobStages); s != SourceSetter {
		t.Errorf("a setter must beat the environment, source %v", s)
	}
}

func TestMalformedEnvironmentFailsHandleCreation(t *testing.T) {
	t.Setenv("FFPA_STAGES", "many")
	_, err := NewForDevice(a100)
	wantError(t, err, StatusBadParamEnvironment, "FFPA_STAGES", "many")
}

func TestExclusiveEnvironmentOptions(t *testing.T) {
	t.Setenv("ENABLE_FFPA_FORCE_QK_F16", "1")
	t.Setenv("ENABLE_FFPA_FORCE_PV_F16", "1")
	_, err := NewForDevice(a100)
	wantError(t, err, StatusBadParamExclusiveOptions, "ENABLE_FFPA_FORCE_QK_F16")
}

func TestEachErrorCarriesTheMessageOfItsOwnCall(t *testing.T) {
	h := describedHandle(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				value := int32(5 + g*1000 + i) // out of range, and different in every call
				err := h.SetPolicyInt32(KnobStages, value)
				want := fmt.Sprintf("FFPA_POLICY_STAGES: %d is out of range", value)
				if e, ok := err.(*Error); !ok || !strings.Contains(e.Message, want) {
					t.Errorf("call with %d got %v", value, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}
