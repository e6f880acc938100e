# C++ sources of the emulated NPU extension (built by npu_migrate.emulate.build).
