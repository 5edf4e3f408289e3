package ffpa

import (
	"errors"
	"math"
	"math/rand"
	"testing"

	"github.com/libffpa/libffpa/bindings/go/ffpa/internal/cudart"
)

// The tests of this file run attention on a GPU and compare it with a float64
// computation on the host. Without a usable GPU they skip, saying why.

// gpuHandle returns a handle on the current GPU, or skips the test.
func gpuHandle(t *testing.T) *Handle {
	t.Helper()
	h, err := New()
	var e *Error
	if errors.As(err, &e) && (e.Status.Category() == StatusNotInitialized || e.Status == StatusNotSupportedArchMismatch) {
		t.Skipf("no usable GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// deviceBuffer copies host values to a new device allocation, freed when the
// test ends.
func deviceBuffer[T any](t *testing.T, host []T, elemSize int) DevicePtr {
	t.Helper()
	p, err := cudart.Malloc(len(host) * elemSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cudart.Free(p) })
	if err := cudart.ToDevice(p, host); err != nil {
		t.Fatal(err)
	}
	return DevicePtr(p)
}

func toHost[T any](t *testing.T, p DevicePtr, n int) []T {
	t.Helper()
	out := make([]T, n)
	if err := cudart.ToHost(out, uintptr(p)); err != nil {
		t.Fatal(err)
	}
	return out
}

// halfToFloat decodes an IEEE fp16 or a bfloat16 value.
func halfToFloat(bits uint16, dt DataType) float64 {
	if dt == BFloat16 {
		return float64(math.Float32frombits(uint32(bits) << 16))
	}
	sign := 1.0
	if bits&0x8000 != 0 {
		sign = -1
	}
	exp, frac := int(bits>>10&0x1f), float64(bits&0x3ff)
	switch exp {
	case 0:
		return sign * frac * math.Pow(2, -24)
	case 31:
		if frac == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * (1 + frac/1024) * math.Pow(2, float64(exp-15))
}

// randomHalves returns n random values of magnitude 1/32 to 1, exactly
// representable in dt, as bits and as float64.
func randomHalves(r *rand.Rand, n int, dt DataType) ([]uint16, []float64) {
	bits, values := make([]uint16, n), make([]float64, n)
	for i := range bits {
		if dt == BFloat16 {
			bits[i] = uint16(r.Intn(2))<<15 | uint16(122+r.Intn(5))<<7 | uint16(r.Intn(128))
		} else {
			bits[i] = uint16(r.Intn(2))<<15 | uint16(10+r.Intn(5))<<10 | uint16(r.Intn(1024))
		}
		values[i] = halfToFloat(bits[i], dt)
	}
	return bits, values
}

// at reads element [b, h, n, d] of a tensor with the given strides.
func at(x []float64, s []int64, b, h, n, d int) float64 {
	return x[int64(b)*s[0]+int64(h)*s[1]+int64(n)*s[2]+int64(d)*s[3]]
}

// reference computes O and the log-sum-exp in float64 (one batch, Hq = Hkv, no
// scale override, square top-left mask when causal).
func reference(q, k, v []float64, p *ForwardProblem) (o, lse [][]float64, probs [][][]float64) {
	hq, n, d := int(p.Q.Dims[1]), int(p.Q.Dims[2]), int(p.Q.Dims[3])
	nkv := int(p.K.Dims[2])
	scale := 1 / math.Sqrt(float64(d))
	o, lse, probs = make([][]float64, hq*n), make([][]float64, hq), make([][][]float64, hq)
	for h := 0; h < hq; h++ {
		lse[h], probs[h] = make([]float64, n), make([][]float64, n)
		for i := 0; i < n; i++ {
			s := make([]float64, nkv)
			top := math.Inf(-1)
			for j := range s {
				s[j] = math.Inf(-1)
				if p.Attention.Causal == CausalNone || j <= i {
					dot := 0.0
					for x := 0; x < d; x++ {
						dot += at(q, p.Q.Strides, 0, h, i, x) * at(k, p.K.Strides, 0, h, j, x)
					}
					s[j] = scale * dot
				}
				top = math.Max(top, s[j])
			}
			sum := 0.0
			for j := range s {
				s[j] = math.Exp(s[j] - top)
				sum += s[j]
			}
			lse[h][i] = top + math.Log(sum)
			row := make([]float64, int(p.V.Dims[3]))
			for j := range s {
				s[j] /= sum
				for x := range row {
					row[x] += s[j] * at(v, p.V.Strides, 0, h, j, x)
				}
			}
			o[h*n+i], probs[h][i] = row, s
		}
	}
	return o, lse, probs
}

func TestForwardOnGPU(t *testing.T) {
	for _, c := range []struct {
		name   string
		dt     DataType
		layout func(DataType, int64, int64, int64, int64) TensorDesc
		causal CausalMode
	}{
		{"fp16-bhnd", Float16, PackedBHND, CausalNone},
		{"bf16-bnhd-causal", BFloat16, PackedBNHD, CausalTopLeft},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := gpuHandle(t)
			const heads, n, d = 2, 48, 128
			lseDesc := LogSumExp(1, heads, n)
			p := &ForwardProblem{
				Attention: AttentionDesc{Causal: c.causal},
				Q:         c.layout(c.dt, 1, heads, n, d), K: c.layout(c.dt, 1, heads, n, d),
				V: c.layout(c.dt, 1, heads, n, d), O: c.layout(c.dt, 1, heads, n, d), LSE: &lseDesc,
			}
			r := rand.New(rand.NewSource(7))
			size := heads * n * d
			qb, q := randomHalves(r, size, c.dt)
			kb, k := randomHalves(r, size, c.dt)
			vb, v := randomHalves(r, size, c.dt)
			ws, err := h.ForwardWorkspaceSize(p)
			if err != nil {
				t.Fatal(err)
			}
			b := &ForwardBuffers{
				Q: deviceBuffer(t, qb, 2), K: deviceBuffer(t, kb, 2), V: deviceBuffer(t, vb, 2),
				O: deviceBuffer(t, make([]uint16, size), 2), LSE: deviceBuffer(t, make([]float32, heads*n), 4),
				WorkspaceSize: ws,
			}
			if ws > 0 {
				b.Workspace = deviceBuffer(t, make([]byte, ws), 1)
			}
			if err := h.Forward(p, b); err != nil {
				t.Fatal(err)
			}
			if err := cudart.Synchronize(); err != nil {
				t.Fatal(err)
			}
			oBits, lseGot := toHost[uint16](t, b.O, size), toHost[float32](t, b.LSE, heads*n)
			o := make([]float64, size)
			for i := range oBits {
				o[i] = halfToFloat(oBits[i], c.dt)
			}
			wantO, wantLSE, _ := reference(q, k, v, p)
			worst := 0.0
			for hh := 0; hh < heads; hh++ {
				for i := 0; i < n; i++ {
					for x := 0; x < d; x++ {
						worst = math.Max(worst, math.Abs(at(o, p.O.Strides, 0, hh, i, x)-wantO[hh*n+i][x]))
					}
					if diff := math.Abs(float64(lseGot[hh*n+i]) - wantLSE[hh][i]); diff > 1e-3 {
						t.Fatalf("lse[%d][%d] = %v, want %v", hh, i, lseGot[hh*n+i], wantLSE[hh][i])
					}
				}
			}
			if worst > 1e-2 {
				t.Errorf("largest error of O: %g", worst)
			}
		})
	}
}

func TestBackwardOnGPU(t *testing.T) {
	h := gpuHandle(t)
	const heads, n, d = 2, 40, 64
	dt := Float16
	fp := forwardProblem(dt, 1, heads, heads, n, n, d)
	bp := backwardProblem(dt, 1, heads, heads, n, n, d)
	r := rand.New(rand.NewSource(11))
	size := heads * n * d
	qb, q := randomHalves(r, size, dt)
	kb, k := randomHalves(r, size, dt)
	vb, v := randomHalves(r, size, dt)
	dob, dO := randomHalves(r, size, dt)
	fws, err := h.ForwardWorkspaceSize(fp)
	if err != nil {
		t.Fatal(err)
	}
	bws, err := h.BackwardWorkspaceSize(bp)
	if err != nil {
		t.Fatal(err)
	}
	ws := fws
	if bws > ws {
		ws = bws
	}
	zeros := make([]uint16, size)
	fb := &ForwardBuffers{
		Q: deviceBuffer(t, qb, 2), K: deviceBuffer(t, kb, 2), V: deviceBuffer(t, vb, 2),
		O: deviceBuffer(t, zeros, 2), LSE: deviceBuffer(t, make([]float32, heads*n), 4),
		Workspace: deviceBuffer(t, make([]byte, ws+1), 1), WorkspaceSize: ws,
	}
	if err := h.Forward(fp, fb); err != nil {
		t.Fatal(err)
	}
	bb := &BackwardBuffers{
		Q: fb.Q, K: fb.K, V: fb.V, O: fb.O, DO: deviceBuffer(t, dob, 2), LSE: fb.LSE,
		DQ: deviceBuffer(t, zeros, 2), DK: deviceBuffer(t, zeros, 2), DV: deviceBuffer(t, zeros, 2),
		Workspace: fb.Workspace, WorkspaceSize: ws,
	}
	if err := h.Backward(bp, bb); err != nil {
		t.Fatal(err)
	}
	if err := cudart.Synchronize(); err != nil {
		t.Fatal(err)
	}
	o, _, probs := reference(q, k, v, fp)
	scale := 1 / math.Sqrt(d)
	wantDQ, wantDK, wantDV := make([]float64, size), make([]float64, size), make([]float64, size)
	for hh := 0; hh < heads; hh++ {
		for i := 0; i < n; i++ {
			rowDot := 0.0 // rowsum(dO ∘ O)
			for x := 0; x < d; x++ {
				rowDot += dO[(hh*n+i)*d+x] * o[hh*n+i][x]
			}
			for j := 0; j < n; j++ {
				dp := 0.0
				for x := 0; x < d; x++ {
					dp += dO[(hh*n+i)*d+x] * v[(hh*n+j)*d+x]
				}
				pij := probs[hh][i][j]
				ds := pij * (dp - rowDot) * scale
				for x := 0; x < d; x++ {
					wantDQ[(hh*n+i)*d+x] += ds * k[(hh*n+j)*d+x]
					wantDK[(hh*n+j)*d+x] += ds * q[(hh*n+i)*d+x]
					wantDV[(hh*n+j)*d+x] += pij * dO[(hh*n+i)*d+x]
				}
			}
		}
	}
	for _, g := range []struct {
		name string
		ptr  DevicePtr
		want []float64
	}{{"dQ", bb.DQ, wantDQ}, {"dK", bb.DK, wantDK}, {"dV", bb.DV, wantDV}} {
		got := toHost[uint16](t, g.ptr, size)
		worst, largest := 0.0, 0.0
		for i := range got {
			worst = math.Max(worst, math.Abs(halfToFloat(got[i], dt)-g.want[i]))
			largest = math.Max(largest, math.Abs(g.want[i]))
		}
		if worst > 1e-2*math.Max(largest, 1) {
			t.Errorf("%s: largest error %g (largest value %g)", g.name, worst, largest)
		}
	}
}
