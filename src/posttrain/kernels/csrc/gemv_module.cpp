// Python bindings of the decode GEMVs (kernels/gemv.py builds this module, packs W and picks the
// kernels this CPU's flags allow): y = x W^T (+ b) for 1 to 8 contiguous rows of x, W packed.
#include <sys/mman.h>
#include <torch/extension.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>

namespace gemv {
void fp32_gemv(int M, const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t K);
void bf16_gemv(int M, const c10::BFloat16* x, const c10::BFloat16* w, const c10::BFloat16* bias, c10::BFloat16* y,
               int64_t N, int64_t K);
void int8_gemv(int M, const c10::BFloat16* x, const int8_t* w, const float* scale, const c10::BFloat16* bias,
               c10::BFloat16* y, int64_t N, int64_t K);
void int8_lut_gemv(int M, const c10::BFloat16* x, const int8_t* w, const float* scale, const c10::BFloat16* bias,
                   c10::BFloat16* y, int64_t N, int64_t K);
}  // namespace gemv

namespace {

// Each kernel's packed layout [N / tile, K / step, tile, step], N padded to a multiple of block and K
// of step: outer.h's panels of 48 outputs (fp32, bf16, int8_lut: each step's 192 bytes in its
// widening's order), gemv.h's panels of 4 rows in blocks of 16 (int8, 16 weights a step).
// max_rows: the most rows of x a call takes (gemv.h MAX_ROWS; outer.h takes any number, ANY_ROWS).
struct Layout {
  int64_t tile, step, block, max_rows;
};
constexpr int64_t ANY_ROWS = std::numeric_limits<int>::max();
const std::map<std::string, Layout> LAYOUTS = {{"fp32", {48, 1, 48, ANY_ROWS}},
                                               {"bf16", {48, 2, 48, ANY_ROWS}},
                                               {"int8", {4, 16, 16, 8}},
                                               {"int8_lut", {48, 4, 48, ANY_ROWS}}};

// Checks x [M, K] (1 <= M <= max_rows) against W packed for `kind` (LAYOUTS: kernels/gemv.py pack) and the
// bias [n]; returns an empty y [M, n].
torch::Tensor checked_output(const char* kind, const torch::Tensor& x, const torch::Tensor& w, int64_t n,
                             const c10::optional<torch::Tensor>& bias, c10::ScalarType w_dtype) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.device().is_cpu(), "gemv: x must be a contiguous CPU [M, K]");
  const Layout l = LAYOUTS.at(kind);
  TORCH_CHECK(x.size(0) >= 1 && x.size(0) <= l.max_rows, "gemv.", kind, ": 1 to ", l.max_rows, " rows, got ", x.size(0));
  const int64_t kp = (x.size(1) + l.step - 1) / l.step * l.step, np = (n + l.block - 1) / l.block * l.block;
  TORCH_CHECK(w.dim() == 4 && w.is_contiguous() && w.scalar_type() == w_dtype && w.size(0) * l.tile == np &&
              w.size(1) * l.step == kp && w.size(2) == l.tile && w.size(3) == l.step,
              "gemv: W must be ", w_dtype, " packed for ", kind, " (kernels/gemv.py pack) from [", n, ", ", x.size(1),
              "], got ", w.sizes());
  if (bias) {
    TORCH_CHECK(bias->is_contiguous() && bias->numel() == n && bias->scalar_type() == x.scalar_type(),
                "gemv: the bias must be a contiguous [N] in x's dtype");
  }
  return torch::empty({x.size(0), n}, x.options());
}

template <typename T>
const T* bias_ptr(const c10::optional<torch::Tensor>& bias) {
  return bias ? bias->data_ptr<T>() : nullptr;
}

torch::Tensor fp32(const torch::Tensor& x, const torch::Tensor& w, int64_t n, const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "gemv.fp32: x must be float32");
  auto y = checked_output("fp32", x, w, n, bias, torch::kFloat32);
  gemv::fp32_gemv(x.size(0), x.data_ptr<float>(), w.data_ptr<float>(), bias_ptr<float>(bias), y.data_ptr<float>(), n,
                  x.size(1));
  return y;
}

torch::Tensor bf16(const torch::Tensor& x, const torch::Tensor& w, int64_t n, const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(x.scalar_type() == torch::kBFloat16, "gemv.bf16: x must be bfloat16");
  auto y = checked_output("bf16", x, w, n, bias, torch::kBFloat16);
  gemv::bf16_gemv(x.size(0), x.data_ptr<c10::BFloat16>(), w.data_ptr<c10::BFloat16>(), bias_ptr<c10::BFloat16>(bias),
                  y.data_ptr<c10::BFloat16>(), n, x.size(1));
  return y;
}

using Int8Kernel = void (*)(int, const c10::BFloat16*, const int8_t*, const float*, const c10::BFloat16*,
                           c10::BFloat16*, int64_t, int64_t);

// Both int8 kernels' binding: x bfloat16, W int8 with a float32 scale per output row.
torch::Tensor int8_call(Int8Kernel kernel, const char* kind, const torch::Tensor& x, const torch::Tensor& w, int64_t n,
                        const torch::Tensor& scale, const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(x.scalar_type() == torch::kBFloat16, "gemv.", kind, ": x must be bfloat16");
  TORCH_CHECK(scale.scalar_type() == torch::kFloat32 && scale.is_contiguous() && scale.numel() == n,
              "gemv.", kind, ": the scales must be a contiguous float32 [N]");
  auto y = checked_output(kind, x, w, n, bias, torch::kInt8);
  kernel(x.size(0), x.data_ptr<c10::BFloat16>(), w.data_ptr<int8_t>(), scale.data_ptr<float>(),
         bias_ptr<c10::BFloat16>(bias), y.data_ptr<c10::BFloat16>(), n, x.size(1));
  return y;
}

torch::Tensor int8(const torch::Tensor& x, const torch::Tensor& w, int64_t n, const torch::Tensor& scale,
                   const c10::optional<torch::Tensor>& bias) {
  return int8_call(gemv::int8_gemv, "int8", x, w, n, scale, bias);
}

torch::Tensor int8_lut(const torch::Tensor& x, const torch::Tensor& w, int64_t n, const torch::Tensor& scale,
                       const c10::optional<torch::Tensor>& bias) {
  return int8_call(gemv::int8_lut_gemv, "int8_lut", x, w, n, scale, bias);
}

// n bytes of CPU memory on whole 2 MB pages, freshly mapped and advised to transparent huge pages
// (advice: where the kernel declines they are the usual 4 KB pages), as a uint8 tensor that unmaps
// them. Fresh: memory malloc hands back may already be faulted in on 4 KB pages.
torch::Tensor huge_bytes(int64_t n) {
  constexpr size_t HUGE_PAGE = size_t(2) << 20;
  TORCH_CHECK(n > 0, "gemv.huge_bytes: n must be positive, got ", n);
  const size_t len = (size_t(n) + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
  char* raw = static_cast<char*>(mmap(nullptr, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  TORCH_CHECK(raw != MAP_FAILED, "gemv.huge_bytes: cannot map ", n, " bytes");
  char* start = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
  const size_t head = size_t(start - raw);  // the slop before start and after start + len, HUGE_PAGE in all
  if (head) munmap(raw, head);
  if (HUGE_PAGE - head) munmap(start + len, HUGE_PAGE - head);
  madvise(start, len, MADV_HUGEPAGE);
  return torch::from_blob(start, {n}, [len](void* p) { munmap(p, len); }, torch::kUInt8);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("fp32", &fp32, "y = x W^T + b: x float32 [M, K], W float32 packed from [n, K] (AVX-512F)");
  m.def("bf16", &bf16, "y = x W^T + b: x bfloat16 [M, K], W bfloat16 packed from [n, K] (AVX-512-BF16)");
  m.def("int8", &int8,
        "y = scale * (x W^T) + b: x bfloat16 [M<=8, K], W int8 packed from [n, K], scale float32 [n] (AVX-512F)");
  m.def("int8_lut", &int8_lut,
        "y = scale * (x W^T) + b: x bfloat16 [M, K], W int8 packed from [n, K], scale float32 [n] "
        "(AVX-512-BF16, VBMI)");
  m.def("huge_bytes", &huge_bytes, "n bytes on fresh 2 MB-aligned pages advised to transparent huge pages (uint8 [n])");
  pybind11::dict layouts, max_rows;  // kind -> (tile, step, block), kind -> rows
  for (const auto& [kind, l] : LAYOUTS) {
    layouts[kind.c_str()] = pybind11::make_tuple(l.tile, l.step, l.block);
    max_rows[kind.c_str()] = l.max_rows;
  }
  m.attr("layouts") = layouts;
  m.attr("max_rows") = max_rows;
}
