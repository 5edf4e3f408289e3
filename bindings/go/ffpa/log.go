package ffpa

// #include <ffpa/ffpa.h>
// #include <stdint.h>
// ffpaStatus_t ffpaGoSetLogCallback(uintptr_t handle);
import "C"

import (
	"fmt"
	"os"
	"runtime/cgo"
	"strconv"
	"sync"
)

// LogLevel is the severity of a log message, also the value type of
// KnobLogLevel (ffpaLogLevel_t).
type LogLevel int32

// The log levels, in increasing verbosity.
const (
	LogOff     LogLevel = C.FFPA_LOG_LEVEL_OFF     // nothing is logged
	LogError   LogLevel = C.FFPA_LOG_LEVEL_ERROR   // GPU work that failed, internal errors
	LogWarning LogLevel = C.FFPA_LOG_LEVEL_WARNING // suspicious but valid use (the default)
	LogInfo    LogLevel = C.FFPA_LOG_LEVEL_INFO    // plans chosen, calls refused
	LogDebug   LogLevel = C.FFPA_LOG_LEVEL_DEBUG   // why each kernel was or was not chosen
)

// String returns "off", "error", "warning", "info", "debug" or "LogLevel(N)".
func (l LogLevel) String() string {
	switch l {
	case LogOff:
		return "off"
	case LogError:
		return "error"
	case LogWarning:
		return "warning"
	case LogInfo:
		return "info"
	case LogDebug:
		return "debug"
	}
	return "LogLevel(" + strconv.Itoa(int(l)) + ")"
}

// logMu serializes SetLogCallback so that the handle it replaces is deleted
// exactly once.
var (
	logMu     sync.Mutex
	logHandle cgo.Handle
)

// SetLogCallback sends every log message of the process to fn instead of
// standard error; nil restores standard error. Which messages are produced is
// decided per handle by KnobLogLevel.
//
// fn is called from whichever thread logs, possibly several at once, while the
// library holds its logging lock: it must return quickly, must not call into
// this package, and must not panic (a panic is reported on standard error and
// dropped, since unwinding through libffpa would leave that lock held). When
// SetLogCallback returns, the previous fn is no longer running and will not be
// called again.
func SetLogCallback(fn func(level LogLevel, message string)) error {
	logMu.Lock()
	defer logMu.Unlock()
	var h cgo.Handle
	if fn != nil {
		h = cgo.NewHandle(fn) // C keeps this integer, never a Go pointer
	}
	if err := call(func() C.ffpaStatus_t { return C.ffpaGoSetLogCallback(C.uintptr_t(h)) }); err != nil {
		if h != 0 {
			h.Delete()
		}
		return err
	}
	if logHandle != 0 {
		logHandle.Delete()
	}
	logHandle = h
	return nil
}

//export ffpaGoLog
func ffpaGoLog(level C.ffpaLogLevel_t, message *C.char, user C.uintptr_t) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "ffpa: the log callback panicked: %v\n", r)
		}
	}()
	fn := cgo.Handle(user).Value().(func(LogLevel, string))
	fn(LogLevel(level), C.GoString(message))
}
