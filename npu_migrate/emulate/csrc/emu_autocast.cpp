// Autocast policy for the emulated NPU (DispatchKey::AutocastPrivateUse1).
// It reuses the op lists that ATen publishes for accelerator backends, so
// torch.autocast("npu") casts the same ops the CUDA policy casts.

#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

using at::Tensor;
using at::Scalar;
using at::IntArrayRef;
using at::ScalarType;

#define NPU_EMU_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NPU_EMU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NPU_EMU_FP32_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NPU_EMU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(NPU_EMU_LOWER)
  AT_FORALL_FP32(NPU_EMU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NPU_EMU_FP32_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(NPU_EMU_PROMOTE)
}

}  // namespace
