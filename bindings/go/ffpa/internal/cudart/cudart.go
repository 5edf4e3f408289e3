// Package cudart reaches the few CUDA runtime functions the tests and the
// example need (allocate, copy, synchronize) without a CUDA header or a build
// dependency: it looks them up at run time, first among the libraries already
// loaded (libffpa brings its CUDA runtime along), then in libcudart.so.
package cudart

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*mallocFn)(void**, size_t);
typedef int (*freeFn)(void*);
typedef int (*memcpyFn)(void*, const void*, size_t, int);
typedef int (*syncFn)(void);
typedef const char* (*errorStringFn)(int);

static void* lookup(const char* name) {
  void* f = dlsym(RTLD_DEFAULT, name);
  if (f == NULL) {
    void* lib = dlopen("libcudart.so", RTLD_NOW | RTLD_GLOBAL);
    if (lib != NULL) f = dlsym(lib, name);
  }
  return f;
}

static int cudaMallocVia(void* f, uintptr_t* ptr, size_t bytes) {
  void* p = NULL;
  int rc = ((mallocFn)f)(&p, bytes);
  *ptr = (uintptr_t)p;
  return rc;
}
static int cudaFreeVia(void* f, uintptr_t ptr) { return ((freeFn)f)((void*)ptr); }
static int cudaToDeviceVia(void* f, uintptr_t dst, const void* src, size_t bytes) {
  return ((memcpyFn)f)((void*)dst, src, bytes, 1);  // cudaMemcpyHostToDevice
}
static int cudaToHostVia(void* f, void* dst, uintptr_t src, size_t bytes) {
  return ((memcpyFn)f)(dst, (const void*)src, bytes, 2);  // cudaMemcpyDeviceToHost
}
static int cudaSyncVia(void* f) { return ((syncFn)f)(); }
static const char* cudaErrorStringVia(void* f, int rc) { return ((errorStringFn)f)(rc); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

var (
	once                                         sync.Once
	errLoad                                      error
	fMalloc, fFree, fMemcpy, fSync, fErrorString unsafe.Pointer
)

func load() error {
	once.Do(func() {
		for _, s := range []struct {
			name string
			dst  *unsafe.Pointer
		}{
			{"cudaMalloc", &fMalloc}, {"cudaFree", &fFree}, {"cudaMemcpy", &fMemcpy},
			{"cudaDeviceSynchronize", &fSync}, {"cudaGetErrorString", &fErrorString},
		} {
			name := C.CString(s.name)
			*s.dst = C.lookup(name)
			C.free(unsafe.Pointer(name))
			if *s.dst == nil {
				errLoad = fmt.Errorf("cudart: %s not found (no CUDA runtime loaded, no libcudart.so)", s.name)
				return
			}
		}
	})
	return errLoad
}

func check(what string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("cudart: %s failed: %s (%d)", what, C.GoString(C.cudaErrorStringVia(fErrorString, rc)), int(rc))
}

// Malloc allocates bytes of device memory and returns its address.
func Malloc(bytes int) (uintptr, error) {
	if err := load(); err != nil {
		return 0, err
	}
	var p C.uintptr_t
	err := check("cudaMalloc", C.cudaMallocVia(fMalloc, &p, C.size_t(bytes)))
	return uintptr(p), err
}

// Free releases memory from Malloc; 0 is ignored.
func Free(ptr uintptr) error {
	if ptr == 0 || load() != nil {
		return nil
	}
	return check("cudaFree", C.cudaFreeVia(fFree, C.uintptr_t(ptr)))
}

// ToDevice copies a host slice of plain values (no Go pointers) to dst.
func ToDevice[T any](dst uintptr, src []T) error {
	if err := load(); err != nil || len(src) == 0 {
		return err
	}
	bytes := C.size_t(len(src)) * C.size_t(unsafe.Sizeof(src[0]))
	return check("cudaMemcpy", C.cudaToDeviceVia(fMemcpy, C.uintptr_t(dst), unsafe.Pointer(&src[0]), bytes))
}

// ToHost copies device memory at src into a host slice of plain values.
func ToHost[T any](dst []T, src uintptr) error {
	if err := load(); err != nil || len(dst) == 0 {
		return err
	}
	bytes := C.size_t(len(dst)) * C.size_t(unsafe.Sizeof(dst[0]))
	return check("cudaMemcpy", C.cudaToHostVia(fMemcpy, unsafe.Pointer(&dst[0]), C.uintptr_t(src), bytes))
}

// Synchronize waits for all work on the current device.
func Synchronize() error {
	if err := load(); err != nil {
		return err
	}
	return check("cudaDeviceSynchronize", C.cudaSyncVia(fSync))
}
