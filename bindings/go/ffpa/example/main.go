// Command example runs one attention forward pass with libffpa on the current
// GPU and checks it: with V constant, every output row must equal that
// constant, whatever Q and K hold. Without a usable GPU it prints the library's
// message and exits 0.
//
//	PKG_CONFIG_PATH=<prefix>/lib/x86_64-linux-gnu/pkgconfig go run ./example
package main

import (
	"fmt"
	"math"
	"os"

	"github.com/libffpa/libffpa/bindings/go/ffpa"
	"github.com/libffpa/libffpa/bindings/go/ffpa/internal/cudart"
)

const (
	batch, heads, seq, dim = 1, 8, 1024, 512
	one                    = 0x3c00 // 1.0 in fp16
	quarter                = 0x3400 // 0.25 in fp16
)

func main() {
	fmt.Printf("libffpa %d (%s)\n", ffpa.Version(), ffpa.BuildInfo())
	if !ffpa.IsCompatible(ffpa.Version()) {
		fail(fmt.Errorf("library version %d cannot serve header version %d", ffpa.Version(), ffpa.HeaderVersion))
	}
	h, err := ffpa.New()
	if err != nil {
		fmt.Println("no forward pass:", err)
		return
	}
	defer h.Close()

	p := &ffpa.ForwardProblem{
		Attention: ffpa.AttentionDesc{Causal: ffpa.CausalTopLeft},
		Q:         ffpa.PackedBHND(ffpa.Float16, batch, heads, seq, dim),
		K:         ffpa.PackedBHND(ffpa.Float16, batch, heads, seq, dim),
		V:         ffpa.PackedBHND(ffpa.Float16, batch, heads, seq, dim),
		O:         ffpa.PackedBHND(ffpa.Float16, batch, heads, seq, dim),
	}
	plan, err := h.DescribeForwardPlan(p)
	check(err)
	fmt.Print(plan)
	ws, err := h.ForwardWorkspaceSize(p)
	check(err)

	n := batch * heads * seq * dim
	q, k, v, o := upload(fill(n, quarter)), upload(fill(n, quarter)), upload(fill(n, one)), upload(fill(n, 0))
	var workspace uintptr
	if ws > 0 {
		workspace, err = cudart.Malloc(ws)
		check(err)
		defer cudart.Free(workspace)
	}
	defer func() {
		for _, ptr := range []uintptr{q, k, v, o} {
			cudart.Free(ptr)
		}
	}()

	check(h.Forward(p, &ffpa.ForwardBuffers{
		Q: ffpa.DevicePtr(q), K: ffpa.DevicePtr(k), V: ffpa.DevicePtr(v), O: ffpa.DevicePtr(o),
		Workspace: ffpa.DevicePtr(workspace), WorkspaceSize: ws,
	}))
	check(cudart.Synchronize())

	out := make([]uint16, n)
	check(cudart.ToHost(out, o))
	worst := 0.0
	for _, bits := range out {
		worst = math.Max(worst, math.Abs(fp16(bits)-1))
	}
	fmt.Printf("forward fp16 B=%d H=%d N=%d D=%d causal: largest |O - 1| = %.2g\n", batch, heads, seq, dim, worst)
	if worst > 1e-2 {
		fail(fmt.Errorf("the output is wrong"))
	}
}

func fill(n int, bits uint16) []uint16 {
	s := make([]uint16, n)
	for i := range s {
		s[i] = bits
	}
	return s
}

func upload(host []uint16) uintptr {
	p, err := cudart.Malloc(2 * len(host))
	check(err)
	check(cudart.ToDevice(p, host))
	return p
}

// fp16 decodes a normal or zero half-precision value, all this example needs.
func fp16(bits uint16) float64 {
	if bits&0x7fff == 0 {
		return 0
	}
	v := (1 + float64(bits&0x3ff)/1024) * math.Pow(2, float64(int(bits>>10&0x1f)-15))
	if bits&0x8000 != 0 {
		v = -v
	}
	return v
}

func check(err error) {
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "example:", err)
	os.Exit(1)
}
