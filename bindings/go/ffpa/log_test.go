package ffpa

import (
	"strings"
	"sync"
	"testing"
)

// captured collects log messages; the library may call from several threads.
type captured struct {
	mu       sync.Mutex
	messages []string
	levels   []LogLevel
}

func (c *captured) log(level LogLevel, message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.levels = append(c.levels, level)
	c.messages = append(c.messages, message)
}

func (c *captured) count(level LogLevel, fragment string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for i, m := range c.messages {
		if c.levels[i] == level && strings.Contains(m, fragment) {
			n++
		}
	}
	return n
}

func TestLogCallbackReceivesDebugMessages(t *testing.T) {
	var c captured
	if err := SetLogCallback(c.log); err != nil {
		t.Fatal(err)
	}
	defer SetLogCallback(nil)
	h := describedHandle(t)
	if err := h.SetPolicyEnum(KnobLogLevel, int32(LogDebug)); err != nil {
		t.Fatal(err)
	}
	// A shape no other test plans: debug lines are emitted once per process.
	p := forwardProblem(Float16, 1, 3, 1, 71, 89, 40)
	if _, err := h.ForwardWorkspaceSize(p); err != nil {
		t.Fatal(err)
	}
	if c.count(LogDebug, "Nq=71") == 0 {
		t.Errorf("no DEBUG message about the problem; got %q", c.messages)
	}
	if c.count(LogInfo, "plan: forward fp16 B=1 Hq=3 Hkv=1 Nq=71") != 1 {
		t.Errorf("no INFO message with the plan; got %q", c.messages)
	}
	if LogDebug.String() != "debug" || LogLevel(9).String() != "LogLevel(9)" {
		t.Error("LogLevel.String")
	}
}

func TestLogCallbackCanBeReplacedAndRemoved(t *testing.T) {
	var first, second captured
	if err := SetLogCallback(first.log); err != nil {
		t.Fatal(err)
	}
	if err := SetLogCallback(second.log); err != nil {
		t.Fatal(err)
	}
	h := describedHandle(t)
	h.SetPolicyEnum(KnobLogLevel, int32(LogInfo))
	h.SetPolicyInt32(KnobStages, 9) // refused: logged as INFO
	if err := SetLogCallback(nil); err != nil {
		t.Fatal(err)
	}
	h.SetPolicyInt32(KnobStages, 8) // logged to standard error, not to a callback
	if n := first.count(LogInfo, "ffpaSetPolicy"); n != 0 {
		t.Errorf("the replaced callback got %d messages", n)
	}
	if n := second.count(LogInfo, "ffpaSetPolicy"); n != 1 {
		t.Errorf("the current callback got %d messages, want 1: %q", n, second.messages)
	}
}
