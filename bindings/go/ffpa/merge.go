package ffpa

/*
#include <ffpa/ffpa.h>
#include <stdint.h>

// The addresses cross as integers (see attention.go) and become the pointer
// arrays of ffpaAttentionMerge here. A count above the maximum is refused by the
// library before it reads any address.
static ffpaStatus_t goMerge(ffpaHandle_t h, int32_t count, ffpaTensorDescriptor_t pod,
    const uintptr_t* po, ffpaTensorDescriptor_t pld, const uintptr_t* pl,
    ffpaTensorDescriptor_t od, uintptr_t o, ffpaTensorDescriptor_t ld, uintptr_t lse) {
  const void* parts[FFPA_MAX_MERGE_PARTIALS];
  const float* lses[FFPA_MAX_MERGE_PARTIALS];
  for (int i = 0; i < FFPA_MAX_MERGE_PARTIALS; ++i) {
    parts[i] = (const void*)po[i];
    lses[i] = (const float*)pl[i];
  }
  return ffpaAttentionMerge(h, count, pod, parts, pld, lses, od, (void*)o, ld, (float*)lse);
}

static ffpaStatus_t goApplySinks(ffpaHandle_t h, uintptr_t sinks, ffpaTensorDescriptor_t od,
    uintptr_t o, ffpaTensorDescriptor_t ld, uintptr_t lse) {
  return ffpaAttentionApplySinks(h, (const float*)sinks, od, (void*)o, ld, (float*)lse);
}

static ffpaStatus_t goSinksBackward(ffpaHandle_t h, uintptr_t sinks, ffpaTensorDescriptor_t od,
    uintptr_t o, ffpaTensorDescriptor_t dod, uintptr_t dO, ffpaTensorDescriptor_t ld,
    uintptr_t lse, uintptr_t dSinks) {
  return ffpaAttentionSinksBackward(h, (const float*)sinks, od, (const void*)o, dod,
                                    (const void*)dO, ld, (const float*)lse, (float*)dSinks);
}
*/
import "C"

import "runtime"

// MaxMergePartials is the most partial results one Merge combines.
const MaxMergePartials = C.FFPA_MAX_MERGE_PARTIALS

// MergeProblem describes a merge of partial attention results over disjoint
// key sets: every partial output shares the layout PartialO ([B, H, N, D],
// fp16, bf16 or fp32) and every partial log-sum-exp PartialLSE ([B, H, N],
// fp32). O has the partials' shape and any of the three types; LSE is nil when
// the merged log-sum-exp is not wanted.
type MergeProblem struct {
	PartialO, PartialLSE, O TensorDesc
	LSE                     *TensorDesc
}

// MergeBuffers holds one address per part in PartialO and PartialLSE (lists of
// different lengths are refused: the missing addresses count as null), and the
// outputs. O may be one of PartialO (and LSE one of PartialLSE) when its
// descriptor has the partials' type and strides: an update in place.
type MergeBuffers struct {
	PartialO, PartialLSE []DevicePtr
	O, LSE               DevicePtr
}

// withDescriptors makes the C descriptors of descs (nil gives NULL) on a locked
// thread and runs f with them; f's status and message are read on that thread.
func withDescriptors(roles []string, descs []*TensorDesc, f func(t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var s descriptors
	defer s.release()
	t := make([]C.ffpaTensorDescriptor_t, len(descs))
	for i := range t {
		var err error
		if t[i], err = s.tensor(roles[i], descs[i]); err != nil {
			return err
		}
	}
	return errorOf(f(t))
}

// Merge enqueues LSE = log(Σ exp(LSE_i)), O = Σ exp(LSE_i − LSE)·O_i, computed
// in fp32, on the handle's stream. Parts whose log-sum-exp is −inf are not read.
func (h *Handle) Merge(p *MergeProblem, b *MergeBuffers) error {
	var parts, lses [MaxMergePartials]C.uintptr_t
	for i := 0; i < len(b.PartialO) && i < MaxMergePartials; i++ {
		parts[i] = C.uintptr_t(b.PartialO[i])
	}
	for i := 0; i < len(b.PartialLSE) && i < MaxMergePartials; i++ {
		lses[i] = C.uintptr_t(b.PartialLSE[i])
	}
	count := len(b.PartialO)
	if len(b.PartialLSE) > count {
		count = len(b.PartialLSE)
	}
	return withDescriptors([]string{"PartialO", "PartialLSE", "O", "LSE"},
		[]*TensorDesc{&p.PartialO, &p.PartialLSE, &p.O, p.LSE},
		func(t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t {
			return C.goMerge(h.h, C.int32_t(count), t[0], &parts[0], t[1], &lses[0], t[2], C.uintptr_t(b.O),
				t[3], C.uintptr_t(b.LSE))
		})
}

// ApplySinks folds attention sinks into a forward result in place: one fp32
// logit per head (sinks holds H of them) joins every softmax denominator of its
// head, so LSE' = log(exp(LSE) + exp(s_h)) and O' = exp(LSE − LSE')·O. Pass O'
// and LSE' to Backward; SinksBackward gives the sinks' gradient.
func (h *Handle) ApplySinks(sinks DevicePtr, oDesc *TensorDesc, o DevicePtr, lseDesc *TensorDesc, lse DevicePtr) error {
	return withDescriptors([]string{"O", "LSE"}, []*TensorDesc{oDesc, lseDesc},
		func(t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t {
			return C.goApplySinks(h.h, C.uintptr_t(sinks), t[0], C.uintptr_t(o), t[1], C.uintptr_t(lse))
		})
}

// SinksBackward writes the sinks' gradient, dSinks[h] = −Σ exp(s_h − LSE')·rowsum(O'·dO)
// over the head's rows, the same bits on every run.
func (h *Handle) SinksBackward(sinks DevicePtr, oDesc *TensorDesc, o DevicePtr, doDesc *TensorDesc, dO DevicePtr,
	lseDesc *TensorDesc, lse DevicePtr, dSinks DevicePtr) error {
	return withDescriptors([]string{"O", "DO", "LSE"}, []*TensorDesc{oDesc, doDesc, lseDesc},
		func(t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t {
			return C.goSinksBackward(h.h, C.uintptr_t(sinks), t[0], C.uintptr_t(o), t[1], C.uintptr_t(dO), t[2],
				C.uintptr_t(lse), C.uintptr_t(dSinks))
		})
}
