package ffpa

// #include <ffpa/ffpa.h>
import "C"

// HeaderVersion is the version of the ffpa.h this package was compiled against,
// encoded as MAJOR*10000 + MINOR*100 + PATCH.
const HeaderVersion = uint32(C.FFPA_VERSION)

// Version returns the version of the loaded library, encoded as HeaderVersion.
func Version() uint32 {
	return uint32(C.ffpaGetVersion())
}

// IsCompatible reports whether a library of version runtime can serve this
// package: the same major version and a minor version at least the header's.
func IsCompatible(runtime uint32) bool {
	return runtime/10000 == HeaderVersion/10000 && runtime%10000/100 >= HeaderVersion%10000/100
}

// BuildInfo returns the library's one-line build description (version, CUDA
// version, architectures, kernel set), meant for logs and bug reports.
func BuildInfo() string {
	return C.GoString(C.ffpaGetBuildInfo())
}
