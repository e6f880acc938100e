"""The emulated NPU's device semantics, checked from a subprocess report."""

from __future__ import annotations

import pytest

from .conftest import SCRIPTS, json_report, run_emulated

pytestmark = pytest.mark.slow

MISMATCH = "Expected all tensors to be on the same device"


def test_tensors_live_on_npu(basics):
    assert basics["npu_method_device"] == "npu:0"
    assert basics["factory_device"] == "npu:0"
    assert basics["is_npu"] == [True, False]
    assert basics["module_npu"] == "npu:0"
    assert basics["sum"] == 21.0
    assert basics["npu_to_cpu"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_the_stand_in_is_the_one_imported_and_autoloads_with_torch(basics):
    assert basics["torch_npu_file"].endswith(
        "npu_migrate/emulate/site/torch_npu/__init__.py"
    )
    # Like torch_npu 2.13 (entry point in group torch.backends), `import torch` loads it.
    assert basics["autoloaded"] is True


def test_module_to_npu_keeps_tied_weights(basics):
    # As with CUDA, moving a module swaps each parameter's data in place, so a
    # head tied to the embedding stays tied (otherwise training diverges from CPU).
    assert basics["tied_after_npu"] == {
        "still_tied": True,
        "same_parameter_object": True,
        "device": "npu:0",
        "n_params": 1,
    }
    assert basics["tied_after_cpu"] is True
    assert basics["shallow_copy_compatible"] is True


@pytest.mark.parametrize("key", ["mix", "mix_matmul"])
def test_tensor_left_on_cpu_fails_like_hardware(basics, key):
    assert basics[key]["ok"] is False
    assert basics[key]["type"] == "RuntimeError"
    assert MISMATCH in basics[key]["msg"]
    assert "npu:0 and cpu" in basics[key]["msg"]


def test_tensors_on_two_npus_do_not_mix(basics):
    assert basics["cross_device"]["ok"] is False
    assert "npu:0 and npu:1" in basics["cross_device"]["msg"]


@pytest.mark.parametrize("key", ["cuda_tensor", "cuda_module"])
def test_leftover_cuda_call_fails(basics, key):
    assert basics[key]["ok"] is False
    assert "Torch not compiled with CUDA enabled" in basics[key]["msg"]


def test_set_device_and_current_device(basics):
    assert basics["device_count"] == 2
    assert basics["is_available"] is True
    assert basics["current_after_set"] == 1
    assert basics["default_npu_after_set"] == "npu:1"
    assert basics["inside_device_ctx"] == 0
    assert basics["after_device_ctx"] == 1
    for key in ("set_bad_device", "tensor_bad_device"):
        assert basics[key]["ok"] is False
        assert "out of range" in basics[key]["msg"]


def test_memory_counters_track_allocations(basics):
    mem = basics["memory"]
    assert mem["delta"] == 4 * 1024 * 1024
    assert mem["freed"] == 4 * 1024 * 1024
    assert mem["peak_ge"] >= 4 * 1024 * 1024
    assert mem["stats_key"] is True
    assert mem["peak_after_reset"] is True
    free, total = mem["mem_get_info"]
    assert 0 < free <= total


def test_rng_is_seedable_and_shares_the_cpu_stream(basics):
    assert basics["rng"] == {
        "seed_repeat": True,
        "state_roundtrip": True,
        "state_all_len": 2,
        "npu_matches_cpu_stream": True,
    }


def test_save_on_npu_then_load_with_map_location(basics):
    load = basics["load"]
    assert load["map_location_device"] == "npu:0"
    assert load["default_device"] == "npu:0"
    assert load["cpu_device"] == "cpu"
    assert load["from_cpu_ckpt_device"] == "npu:0"
    assert load["file_device"] == "npu:0"
    assert load["values_equal"] and load["state_equal"]


def test_torch_compile_with_eager_backend(basics):
    assert basics["compile_eager"] == {"ok": True, "value": True}


def test_api_surface(basics):
    assert basics["hccl_available"] is True
    assert basics["unimplemented_npugraph"]["type"] == "NotImplementedError"
    assert "npu-migrate" in basics["unimplemented_npugraph"]["msg"]
    # A name real torch_npu lacks stays an AttributeError (a migration bug, not a gap).
    assert basics["missing_nvtx"]["type"] == "AttributeError"
    # Fused kernels import as on hardware (transformers imports them at import
    # time) and raise only when called; a name torch_npu lacks stays missing.
    assert basics["fused_kernel"]["type"] == "NotImplementedError"
    assert "npu-migrate" in basics["fused_kernel"]["msg"]
    assert basics["fused_kernel_import"] == {"ok": True, "value": "imported"}
    assert basics["fused_kernel_unknown"]["type"] == "AttributeError"
    # torch.npu.random: the npu RNG is torch's CPU generator (Trainer saves it).
    assert basics["npu_random"] == {"ok": True, "value": [True, None, None, 3]}
    assert basics["record_stream"] == {"ok": True, "value": None}
    assert basics["hf32"] == [True, False]
    assert basics["hf32_type_check"]["type"] == "TypeError"
    assert basics["events"] == [True, True]
    assert basics["current_stream_device"] == "npu:0"
    assert basics["capability"] is None
    assert basics["bf16"] is True
    assert basics["emitted_missing"] == []
    assert basics["amp_missing"] == []
    assert basics["fallback_calls_positive"] is True


def test_npu_all_matches_the_real_torch_npu_names(basics):
    from npu_migrate.emulate.api_names import NPU_ALL

    assert basics["npu_all"] == list(NPU_ALL)
    assert set(basics["implemented"]) <= set(NPU_ALL)
    assert len(basics["implemented"]) >= 60


def test_every_exposed_name_exists_in_the_real_api_table(basics):
    from npu_migrate.emulate.api_names import api_table_names

    for module, names in basics["exposed"].items():
        table = api_table_names(module)
        assert table, f"{module} missing from npu_migrate/data/torch_npu_api.json"
        assert names, module
        assert set(names) <= table, (module, sorted(set(names) - table))


def test_table_names_outside_all_raise_not_implemented(basics):
    assert basics["table_only_name"]["type"] == "NotImplementedError"


def test_exit_handshake_waits_for_the_npu_autograd_thread(emulator_build):
    report = json_report(run_emulated(SCRIPTS / "probe_shutdown.py"))
    assert report["hook_thread"] != "busy-backward"  # the hook ran on torch's device thread
    assert report["settled_s"] >= 0.45  # not before the device thread finished the busy task
    assert report["stashed_nothing"]
