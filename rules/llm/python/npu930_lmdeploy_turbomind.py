"""NPU930: lmdeploy's TurboMind engine (CUDA-only); the PyTorch engine runs on Ascend."""

from __future__ import annotations

from npu_migrate.rules.unsupported._common import CudaOnlyPackage

from npu_migrate.python.rule import Example

ROUTE = (
    "use lmdeploy's PyTorch engine on Ascend: pipeline(model, backend_config=PytorchEngineConfig(device_type='ascend', "
    "...)) (lmdeploy's Ascend support goes through its dlinfer backend)"
)


USES = {"lmdeploy": ROUTE}


class LmdeployTurbomind(CudaOnlyPackage):
    id = "NPU930"
    impact = "blocking"
    name = "lmdeploy-turbomind"
    summary = "Report lmdeploy's TurboMind engine; use `PytorchEngineConfig(device_type='ascend')`"
    label = "lmdeploy TurboMind"
    packages = ("lmdeploy.turbomind", "lmdeploy.TurbomindEngineConfig", "lmdeploy.messages.TurbomindEngineConfig")
    problem = "TurboMind is lmdeploy's CUDA C++ inference engine"
    import_suggestion = ROUTE
    uses = USES
    triggers = ("turbomind", "TurbomindEngineConfig")
    rationale = f"""
lmdeploy has two engines: TurboMind (CUDA C++, the default for supported
models) and the PyTorch engine, which is the one that runs on Ascend
(`PytorchEngineConfig(device_type='ascend')`, through dlinfer). InternVL's
README deploys with `TurbomindEngineConfig`. Route: {ROUTE}.
"""
    examples = (
        Example("from lmdeploy import pipeline, TurbomindEngineConfig  # reported\n"),
        Example("from lmdeploy import pipeline, PytorchEngineConfig\n"),
    )
