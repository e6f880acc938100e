// npu-migrate emulated NPU: a PrivateUse1 backend whose "device memory" is
// host memory. Every op without a native kernel here goes through the CPU
// boxed fallback, which computes on CPU aliases of the npu tensors and, like a
// real accelerator, refuses inputs that live on different devices.
//
// Written for torch 2.13; the interfaces follow c10/core/impl/
// DeviceGuardImplInterface.h, ATen/detail/PrivateUse1HooksInterface.h and
// ATen/native/CPUFallback.h of that release.

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/library.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace npu_emu {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 64;

// ---------------------------------------------------------------- devices --

static int device_count_from_env() {
  const char* env = std::getenv("NPU_MIGRATE_EMULATOR_DEVICES");
  if (env == nullptr || *env == '\0') return 1;
  int n = std::atoi(env);
  if (n < 1) n = 1;
  if (n > kMaxDevices) n = kMaxDevices;
  return n;
}

static int device_count() {
  static const int n = device_count_from_env();
  return n;
}

static thread_local c10::DeviceIndex t_current_device = 0;

static void check_device(c10::DeviceIndex d) {
  TORCH_CHECK(
      d >= 0 && d < device_count(),
      "npu device ", static_cast<int>(d), " is out of range: the emulated NPU "
      "(npu-migrate) has ", device_count(), " device(s). Set "
      "NPU_MIGRATE_EMULATOR_DEVICES or use --nproc to have more.");
}

static void set_current(c10::DeviceIndex d) {
  check_device(d);
  t_current_device = d;
}

// ------------------------------------------------------------- allocators --

struct DeviceStats {
  int64_t allocated = 0;
  int64_t peak = 0;
  int64_t num_allocs = 0;
  int64_t num_frees = 0;
};

// Allocator state is deliberately leaked: tensors may still be freed during
// interpreter shutdown, after this library's static destructors have run.
struct MemState {
  std::mutex mutex;
  DeviceStats stats[kMaxDevices];
  std::unordered_map<void*, std::pair<size_t, int>> live;
};
static MemState& mem() {
  static MemState* state = new MemState();
  return *state;
}
#define g_mem_mutex (mem().mutex)
#define g_stats (mem().stats)
#define g_live (mem().live)

static void emu_free(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    auto it = g_live.find(ptr);
    if (it != g_live.end()) {
      auto& s = g_stats[it->second.second];
      s.allocated -= static_cast<int64_t>(it->second.first);
      s.num_frees += 1;
      g_live.erase(it);
    }
  }
  c10::free_cpu(ptr);
}

struct EmuDeviceAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex dev = t_current_device;
    void* ptr = nbytes == 0 ? nullptr : c10::alloc_cpu(nbytes);
    if (ptr != nullptr) {
      std::lock_guard<std::mutex> lock(g_mem_mutex);
      g_live[ptr] = {nbytes, dev};
      auto& s = g_stats[dev];
      s.allocated += static_cast<int64_t>(nbytes);
      s.num_allocs += 1;
      if (s.allocated > s.peak) s.peak = s.allocated;
    }
    return {ptr, ptr, &emu_free, c10::Device(kNpu, dev)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &emu_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

// Allocators, guard and hooks are leaked on purpose: torch keeps raw pointers
// to them and may use them during interpreter shutdown.
static EmuDeviceAllocator& g_device_allocator = *new EmuDeviceAllocator();
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);

// Page-locked host memory does not exist here; the host allocator only
// remembers which pointers it handed out so that is_pinned() answers truly.
struct HostState {
  std::mutex mutex;
  std::unordered_set<void*> live;
};
static HostState& host() {
  static HostState* state = new HostState();  // leaked, see MemState
  return *state;
}
#define g_host_mutex (host().mutex)
#define g_host_live (host().live)

static void host_free(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_host_mutex);
    g_host_live.erase(ptr);
  }
  c10::free_cpu(ptr);
}

struct EmuHostAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* ptr = nbytes == 0 ? nullptr : c10::alloc_cpu(nbytes);
    if (ptr != nullptr) {
      std::lock_guard<std::mutex> lock(g_host_mutex);
      g_host_live.insert(ptr);
    }
    return {ptr, ptr, &host_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &host_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

static EmuHostAllocator& g_host_allocator = *new EmuHostAllocator();

// ---------------------------------------------------------- device guard --

struct EmuEvent {
  std::chrono::steady_clock::time_point when;
};

struct EmuGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }
  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kNpu);
    c10::Device old(kNpu, t_current_device);
    if (d.index() >= 0 && d.index() != t_current_device) set_current(d.index());
    return old;
  }
  c10::Device getDevice() const override { return {kNpu, t_current_device}; }
  void setDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kNpu);
    if (d.index() >= 0) set_current(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < device_count()) t_current_device = d.index();
  }
  // One in-order "stream" per device: every op has finished when it returns.
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count());
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<EmuEvent*>(event);
  }
  void record(void** event, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    if (*event == nullptr) *event = new EmuEvent();
    static_cast<EmuEvent*>(*event)->when = std::chrono::steady_clock::now();
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  double elapsedTime(void* a, void* b, const c10::DeviceIndex) const override {
    TORCH_CHECK(a != nullptr && b != nullptr,
                "Both events must be recorded before calculating elapsed time.");
    auto d = static_cast<EmuEvent*>(b)->when - static_cast<EmuEvent*>(a)->when;
    return std::chrono::duration<double, std::milli>(d).count();
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, EmuGuardImpl);

// ------------------------------------------------------------------ hooks --

static void resize_storage_bytes(const c10::Storage& storage, size_t newsize) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  c10::DataPtr fresh = g_device_allocator.allocate(newsize);
  const size_t keep = std::min(newsize, impl->nbytes());
  if (keep > 0 && impl->data() != nullptr) {
    std::memcpy(fresh.get(), impl->data(), keep);
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(newsize);
}

struct EmuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(device_count());
  }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current(d); }
  c10::DeviceIndex getCurrentDevice() const override { return t_current_device; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = t_current_device;
    if (d >= 0) set_current(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  // Random numbers for npu tensors are drawn on CPU by the fallback kernels,
  // so the npu default generator *is* the CPU default generator.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override {
    return at::detail::createCPUGenerator();
  }
  at::Device getDeviceFromPtr(void* data) const override {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    auto it = g_live.find(data);
    if (it != g_live.end()) return {kNpu, static_cast<c10::DeviceIndex>(it->second.second)};
    return {kNpu, t_current_device};
  }
  bool isPinnedPtr(const void* data) const override {
    std::lock_guard<std::mutex> lock(g_host_mutex);
    return g_host_live.count(const_cast<void*>(data)) > 0;
  }
  c10::Allocator* getPinnedMemoryAllocator() const override {
    return &g_host_allocator;
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
};

static bool register_hooks() {
  at::RegisterPrivateUse1HooksInterface(new EmuHooks());
  return true;
}
static const bool g_hooks_registered = register_hooks();

// ------------------------------------------------------------ strict mode --

static std::atomic<bool> g_forbid_float64{false};
struct DenyState {
  std::mutex mutex;
  std::unordered_set<std::string> ops;
};
static DenyState& deny() {
  static DenyState* state = new DenyState();  // leaked, see MemState
  return *state;
}
#define g_deny_mutex (deny().mutex)
#define g_deny_ops (deny().ops)

// float64 that torch itself creates on the device (GradScaler.unscale_ takes
// the reciprocal of the scale in float64) is not the user's: the Python side
// marks such library code, on the calling thread only, as exempt.
static thread_local int t_float64_exempt = 0;

static void check_dtype(c10::ScalarType dtype) {
  if (t_float64_exempt == 0 && g_forbid_float64.load(std::memory_order_relaxed) &&
      (dtype == c10::ScalarType::Double || dtype == c10::ScalarType::ComplexDouble)) {
    TORCH_CHECK_TYPE(
        false, "npu-migrate emulator (strict mode): ", c10::toString(dtype),
        " tensors are not allowed on npu; Ascend NPUs have no general float64 "
        "support. Keep float64 math on CPU or use float32.");
  }
}

static void check_denied(const c10::OperatorName& name) {
  std::lock_guard<std::mutex> lock(g_deny_mutex);
  if (g_deny_ops.empty()) return;
  std::string full = name.name;
  if (!name.overload_name.empty()) full += "." + name.overload_name;
  if (g_deny_ops.count(name.name) || g_deny_ops.count(full)) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, "npu-migrate emulator (strict mode): operator '", full,
        "' is on the deny-list of ops treated as unsupported on Ascend NPU "
        "(NPU_MIGRATE_EMULATOR_DENY_OPS).");
  }
}

// ---------------------------------------------------------- native kernels --

static at::Tensor emu_empty(
    c10::IntArrayRef size, std::optional<c10::ScalarType> dtype_opt,
    std::optional<c10::Layout> layout_opt, std::optional<c10::Device> device_opt,
    std::optional<bool> pin_memory_opt,
    std::optional<c10::MemoryFormat> memory_format_opt) {
  const auto device = c10::device_or_default(device_opt);
  const auto dtype = c10::dtype_or_default(dtype_opt);
  TORCH_CHECK(c10::layout_or_default(layout_opt) == c10::Layout::Strided,
              "the emulated NPU only supports strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory_opt),
              "Only CPU tensors can be pinned");
  check_dtype(dtype);
  const c10::DeviceGuard guard(device);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, &g_device_allocator, ks, dtype, memory_format_opt);
}

static at::Tensor emu_empty_strided(
    c10::IntArrayRef size, c10::IntArrayRef stride,
    std::optional<c10::ScalarType> dtype_opt, std::optional<c10::Layout> layout_opt,
    std::optional<c10::Device> device_opt, std::optional<bool> pin_memory_opt) {
  const auto device = c10::device_or_default(device_opt);
  const auto dtype = c10::dtype_or_default(dtype_opt);
  TORCH_CHECK(c10::layout_or_default(layout_opt) == c10::Layout::Strided,
              "the emulated NPU only supports strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory_opt),
              "Only CPU tensors can be pinned");
  check_dtype(dtype);
  const c10::DeviceGuard guard(device);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, &g_device_allocator, ks, dtype);
}

static at::Tensor emu_as_strided(const at::Tensor& self, c10::SymIntArrayRef size,
                                 c10::SymIntArrayRef stride,
                                 std::optional<c10::SymInt> storage_offset) {
  std::optional<int64_t> offset;
  if (storage_offset.has_value()) offset = storage_offset->expect_int();
  return at::native::as_strided_tensorimpl(
      self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride), offset);
}

static at::Tensor emu_view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

// View ops whose only kernels are per-backend (CPU, CUDA, Meta): through the
// fallback they would return a CPU-computed copy, so writes through the view
// would be lost. Their native functions only restride the input, so they are
// device-generic. (Found by listing every aten op that returns an alias and
// has a CPU kernel but no composite one: as_strided, view, _reshape_alias,
// unfold, view_as_real, view_as_complex, and a nested-tensor op.)
static at::Tensor emu_unfold(const at::Tensor& self, int64_t dimension, int64_t size,
                             int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

static at::Tensor emu_view_as_real(const at::Tensor& self) {
  return at::native::view_as_real(self);
}

static at::Tensor emu_view_as_complex(const at::Tensor& self) {
  return at::native::view_as_complex(self);
}

// Streams are in order here, so a tensor used on another stream needs no
// bookkeeping before its memory is reused (FSDP calls this on every shard).
static void emu_record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNpu, "record_stream: expected an npu stream, got ",
              stream);
}

static at::Tensor emu_reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                                    c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

static const at::Tensor& emu_resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                                     std::optional<at::MemoryFormat> memory_format) {
  check_dtype(self.scalar_type());
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), memory_format);
}

static at::Tensor host_alias(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(),
                       t.options().device(c10::DeviceType::CPU));
}

static at::Tensor emu_copy_from(const at::Tensor& self, const at::Tensor& dst,
                                bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "_copy_from: undefined tensor");
  TORCH_CHECK(self.is_cpu() || self.is_privateuseone(),
              "cannot copy from ", self.device(), " to ", dst.device());
  TORCH_CHECK(dst.is_cpu() || dst.is_privateuseone(),
              "cannot copy from ", self.device(), " to ", dst.device());
  if (self.numel() == 0) return dst;
  at::Tensor src_h = self.is_cpu() ? self : host_alias(self);
  at::Tensor dst_h = dst.is_cpu() ? dst : host_alias(dst);
  dst_h.copy_(src_h, non_blocking);
  return dst;
}

static at::Tensor emu_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes(), std::nullopt);
  return emu_copy_from(self, dst, false);
}

static at::Scalar emu_local_scalar_dense(const at::Tensor& self) {
  return at::native::_local_scalar_dense_cpu(host_alias(self));
}

static at::Tensor& emu_set_tensor(at::Tensor& self, const at::Tensor& src) {
  return at::native::set_tensor_(self, src);
}

static at::Tensor& emu_set_storage(at::Tensor& self, at::Storage src) {
  return at::native::set_(self, std::move(src));
}

static at::Tensor& emu_set_storage_offset(at::Tensor& self, at::Storage src,
                                          int64_t offset, c10::IntArrayRef size,
                                          c10::IntArrayRef stride) {
  return at::native::set_storage_cpu_(self, std::move(src), offset, size, stride);
}

// native_batch_norm updates running_mean/running_var in place, but its schema
// does not mark them as written, so the generic fallback would update CPU
// copies and drop the result. Run the CPU kernel on host aliases instead.
static void check_same_device(const at::Tensor& ref, const std::optional<at::Tensor>& t) {
  if (t.has_value() && t->defined() && t->device() != ref.device()) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least "
                "two devices, ", ref.device(), " and ", t->device(), "!");
  }
}

static std::optional<at::Tensor> host_opt(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return host_alias(*t);
}

static std::tuple<at::Tensor, at::Tensor, at::Tensor> emu_native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  for (const auto* t : {&weight, &bias, &running_mean, &running_var}) check_same_device(input, *t);
  const c10::DeviceGuard guard(input.device());
  auto out = at::native_batch_norm(host_alias(input), host_opt(weight), host_opt(bias),
                                   host_opt(running_mean), host_opt(running_var), training,
                                   momentum, eps);
  auto to_dev = [&](const at::Tensor& t) { return t.to(input.device()); };
  return {to_dev(std::get<0>(out)), to_dev(std::get<1>(out)), to_dev(std::get<2>(out))};
}

// scaled_dot_product_attention (CompositeImplicitAutograd) asks a per-device
// stub which kernel to use and takes the unfused math path on devices with no
// stub. Answer as the CPU stub answers for the same tensors, so npu takes the
// kernel CPU takes (_scaled_dot_product_flash_attention_for_cpu, whose CPU
// kernel and backward then run through the fallback). The CPU rules only read
// metadata (shapes, strides, dtypes, requires_grad), so they see CPU aliases.
static at::Tensor choice_alias(const at::Tensor& t) {
  at::Tensor h = t.numel() == 0
                     ? at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kCPU))
                     : host_alias(t);
  if (t.requires_grad()) h.set_requires_grad(true);
  return h;
}

static int64_t emu_fused_sdp_choice(const at::Tensor& query, const at::Tensor& key,
                                    const at::Tensor& value,
                                    const std::optional<at::Tensor>& attn_mask, double dropout_p,
                                    bool is_causal, std::optional<double> scale, bool enable_gqa) {
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value() && attn_mask->defined()) mask = choice_alias(*attn_mask);
  // The CPU stub's kernel, called directly (the stub's own CPU lookup is not
  // exported from libtorch).
  return at::native::_fused_sdp_choice_cpp(choice_alias(query), choice_alias(key),
                                           choice_alias(value), mask, dropout_p, is_causal,
                                           scale, enable_gqa);
}

}  // namespace npu_emu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &npu_emu::emu_fused_sdp_choice)
}  // namespace at::native

namespace npu_emu {

// Module.to() moves a parameter by swapping its data in place (param.data =
// moved) only when torch says the two tensors have compatible shallow-copy
// types; otherwise it makes a new Parameter per module, which unties shared
// weights (a tied LM head stops being the embedding). torch's own rule counts
// CPU and CUDA as interchangeable dense tensors but not PrivateUse1, so extend
// it to npu, as on an accelerator.
static bool dense_cpu_or_npu(c10::DispatchKeySet ks) {
  return ks.has(c10::DispatchKey::Dense) &&
         (ks.has_backend(c10::BackendComponent::CPUBit) ||
          ks.has_backend(c10::BackendComponent::PrivateUse1Bit));
}

static bool emu_has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set())) return true;
  return dense_cpu_or_npu(self.key_set()) && dense_cpu_or_npu(from.key_set());
}

static std::atomic<int64_t> g_fallback_calls{0};

// Accelerators reject kernels whose tensor arguments live on different devices.
// CPU 0-dim tensors are accepted (as CUDA accepts them as scalars), and so are
// CPU index tensors of the indexing ops, which CUDA moves to the device.
static void check_devices(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name().name;
  if (name == "aten::index" || name == "aten::index_put_" || name == "aten::index_put" ||
      name == "aten::_index_put_impl_") {
    return;
  }
  std::optional<c10::Device> first;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return;
    if (!first.has_value()) {
      first = t.device();
    } else if (t.device() != *first) {
      TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least "
                  "two devices, ", *first, " and ", t.device(), "!");
    }
  };
  const auto n = op.schema().arguments().size();
  for (const auto& iv : torch::jit::last(*stack, n)) {
    if (iv.isTensor()) {
      visit(iv.toTensor());
    } else if (iv.isTensorList()) {
      for (const at::Tensor& t : iv.toTensorList()) visit(t);
    } else if (iv.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& t : iv.toOptionalTensorList()) {
        if (t.has_value()) visit(*t);
      }
    }
  }
}

static void emu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  check_denied(op.schema().operator_name());
  check_devices(op, stack);
  g_fallback_calls.fetch_add(1, std::memory_order_relaxed);
  at::native::cpu_fallback(op, stack);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", emu_empty);
  m.impl("empty_strided", emu_empty_strided);
  m.impl("as_strided", emu_as_strided);
  m.impl("view", emu_view);
  m.impl("_reshape_alias", emu_reshape_alias);
  m.impl("unfold", emu_unfold);
  m.impl("view_as_real", emu_view_as_real);
  m.impl("view_as_complex", emu_view_as_complex);
  m.impl("record_stream", emu_record_stream);
  m.impl("resize_", emu_resize_);
  m.impl("_copy_from", emu_copy_from);
  m.impl("_copy_from_and_resize", emu_copy_from_and_resize);
  m.impl("_local_scalar_dense", emu_local_scalar_dense);
  m.impl("native_batch_norm", emu_native_batch_norm);
  m.impl("_has_compatible_shallow_copy_type", emu_has_compatible_shallow_copy_type);
  m.impl("set_.source_Tensor", emu_set_tensor);
  m.impl("set_.source_Storage", emu_set_storage);
  m.impl("set_.source_Storage_storage_offset", emu_set_storage_offset);
  // CompositeExplicitAutograd kernels that would otherwise route to the
  // unimplemented convolution_overrideable: run them on CPU instead.
  m.impl("convolution", torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
  m.impl("convolution_backward", torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
  // The composite mse_loss reduces through an out= call that makes the CPU
  // kernel warn about resizing a 0-dim output; use the CPU kernel directly.
  m.impl("mse_loss", torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
  // Ops with a CPU kernel whose other registrations are math decompositions.
  // Without a PrivateUse1 kernel the dispatcher prefers those decompositions
  // (CompositeExplicitAutograd for the backend key; CompositeImplicitAutograd
  // for the autograd key, which also replaces the derivative formula) over
  // the boxed fallback, so npu would round differently from CPU. Registering
  // the fallback makes npu take the CPU kernel and the CPU autograd formula.
  // (Found by comparing the computed dispatch tables of CPU and PrivateUse1.)
  for (const char* name : {"native_layer_norm", "native_group_norm", "silu_backward",
                           "mish_backward", "addr"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
}

// ---------------------------------------------- control ops for Python ----

static std::vector<int64_t> memory_stats(int64_t device) {
  check_device(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  const auto& s = g_stats[device];
  return {s.allocated, s.peak, s.num_allocs, s.num_frees};
}

static void reset_peak(int64_t device) {
  check_device(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  g_stats[device].peak = g_stats[device].allocated;
}

static void reset_counts(int64_t device) {
  check_device(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  g_stats[device].num_allocs = 0;
  g_stats[device].num_frees = 0;
}

static void set_strict(bool forbid_float64, std::vector<std::string> deny_ops) {
  g_forbid_float64.store(forbid_float64);
  std::lock_guard<std::mutex> lock(g_deny_mutex);
  g_deny_ops.clear();
  for (auto& name : deny_ops) {
    if (name.find("::") == std::string::npos) name = "aten::" + name;
    g_deny_ops.insert(name);
  }
}

static void float64_exempt(bool enter) {
  if (enter) {
    ++t_float64_exempt;
  } else if (t_float64_exempt > 0) {
    --t_float64_exempt;
  }
}

static int64_t fallback_calls() { return g_fallback_calls.load(); }

static int64_t emu_device_count() { return device_count(); }

TORCH_LIBRARY(npu_emu, m) {
  m.def("memory_stats(int device) -> int[]", &memory_stats);
  m.def("reset_peak(int device) -> ()", &reset_peak);
  m.def("reset_counts(int device) -> ()", &reset_counts);
  m.def("set_strict(bool forbid_float64, str[] deny_ops) -> ()", &set_strict);
  m.def("float64_exempt(bool enter) -> ()", &float64_exempt);
  m.def("fallback_calls() -> int", &fallback_calls);
  m.def("device_count() -> int", &emu_device_count);
}

}  // namespace npu_emu
