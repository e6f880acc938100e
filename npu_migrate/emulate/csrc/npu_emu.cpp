// The emulated NPU's one translation unit ("unity build"): both parts share the
// cost of parsing torch's headers, which dominates the compile. Measured on our
// 2-core machines (npu_migrate/emulate/build.py): 10.8 CPU-s for this file against
// 7.6 + 9.8 CPU-s for the two parts compiled separately.
#include "emu_device.cpp"
#include "emu_autocast.cpp"
