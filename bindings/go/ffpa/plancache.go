package ffpa

// #include <ffpa/ffpa.h>
import "C"

import "unsafe"

// PlanCacheStats holds the counters of a handle's plan cache.
type PlanCacheStats struct {
	Hits      uint64 // lookups that found a plan
	Misses    uint64 // lookups that had to plan
	Evictions uint64 // plans dropped because the cache was full
	Size      uint64 // plans held now
	Capacity  uint64 // plans it may hold (KnobPlanCacheCapacity)
}

// PlanCacheStats reads the plan-cache counters of the handle.
func (h *Handle) PlanCacheStats() (PlanCacheStats, error) {
	var c C.ffpaPlanCacheStats_t
	c.structSize = C.uint32_t(unsafe.Sizeof(c))
	if err := call(func() C.ffpaStatus_t { return C.ffpaGetPlanCacheStats(h.h, &c) }); err != nil {
		return PlanCacheStats{}, err
	}
	return PlanCacheStats{
		Hits:      uint64(c.hits),
		Misses:    uint64(c.misses),
		Evictions: uint64(c.evictions),
		Size:      uint64(c.size),
		Capacity:  uint64(c.capacity),
	}, nil
}

// ClearPlanCache drops every cached plan of the handle and resets its counters.
func (h *Handle) ClearPlanCache() error {
	return call(func() C.ffpaStatus_t { return C.ffpaClearPlanCache(h.h) })
}
