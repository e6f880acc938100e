"""NPU980: Ray nodes declaring GPUs inside Kubernetes manifests and other YAML (KubeRay's
``rayStartParams: {num-gpus: "N"}``, ``ray start --num-gpus N`` in a container's command)."""

from __future__ import annotations

import itertools

from npu_migrate.rules.cluster.shell.npu955_ray_start_gpus import ray_start

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.shell import syntax
from npu_migrate.shell.parser import parse

#: keys whose string values are shell commands: a container's ``command``/``args``
#: (Kubernetes, KubeRay, JobSet), compose's ``command``/``entrypoint``, and the script keys of
#: job files (SkyPilot ``run``/``setup``, GitLab ``script``)
_SHELL_KEYS = frozenset({"command", "args", "entrypoint", "run", "setup", "script"})
_WHY = ('Ray counts Ascend devices as the resource "NPU", declared with --resources (ray 2.60.0: '
        "ray/_private/accelerators/npu.py, ray/scripts/scripts.py); a node started with --num-gpus offers GPUs "
        "that do not exist, and tasks asking for \"NPU\" see none declared")


def _count(text: str) -> float | None:
    try:
        return float(text.strip().strip("\"'"))
    except ValueError:
        return None


class KubernetesRayGpus(ConfigRule):
    id = "NPU980"
    impact = "blocking"
    name = "kubernetes-ray-gpus"
    fixable = False
    summary = ("Report Ray nodes declaring GPUs in YAML: KubeRay `rayStartParams: {num-gpus: \"N\"}` and "
               "`ray start --num-gpus N` in a container's `command`/`args` (and other script keys)")
    triggers = (b"num-gpus",)
    rationale = f"""
NPU955 rewrites `ray start --num-gpus N` in shell scripts. The same start line also sits
inside Kubernetes manifests (a JobSet's or Deployment's container `command`/`args`,
usually a `bash -c` block scalar: NeMo-RL's `infra/examples/*-jobset.yaml`) and KubeRay
writes it itself from a `RayCluster`/`RayJob` group's `rayStartParams` (`num-gpus: "4"`
becomes `--num-gpus=4`). {_WHY}. On Ascend the node declares `--resources='{{"NPU": N}}'`;
in `rayStartParams` that is a `resources` entry holding the JSON (KubeRay passes
each entry to `ray start` as `--key=value`). A count of 0 (a CPU-only head) is left alone.

Reported, never rewritten: the command sits in a YAML string (a rewrite would have to
requote it for YAML and for the shell), and the pod's `nvidia.com/gpu` request (NPU962)
and image (NPU963) change with it. The shell command is read with the shell parser
(`ray start` also behind wrappers), each finding at the option's own line. Commands kept
as one word per list item (`args: ["ray", "start", "--num-gpus=4"]`) are read too.
"""
    examples = (
        Example('workerGroupSpecs:\n  - groupName: gpu\n    rayStartParams:\n      num-gpus: "4"  # reported\n'),
        Example('headGroupSpec:\n  rayStartParams:\n    num-gpus: "0"\n    dashboard-host: "0.0.0.0"\n'),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self._words: dict[tuple[str, ...], list[str]] = {}  # one-word-per-item commands read so far, per key

    def visit_scalar(self, scalar) -> None:
        keys = scalar.keys
        if scalar.is_key or not keys:
            return
        value = scalar.value
        if keys[-1] == "num-gpus" and len(keys) >= 2 and keys[-2] == "rayStartParams":
            count = _count(value)
            if count is None or count > 0:
                self.report(scalar, f"KubeRay starts this group's Ray nodes with `--num-gpus={value}` "
                            "(`rayStartParams.num-gpus`)",
                            f"replace it with `resources: '\"{{\\\"NPU\\\": {value}}}\"'` in `rayStartParams`; "
                            f"{_WHY}")
            return
        if keys[-1] not in _SHELL_KEYS:
            return
        words = self._words.setdefault(keys, [])
        if " " not in value.strip():  # one word of a command written as a list
            words.append(value)
            if value.startswith("--num-gpus") and self._started(words[:-1]):
                self._report_option(scalar.start, value, value.partition("=")[2] or "N")
            return
        if b"--num-gpus" not in value.encode() or "ray" not in value:
            return
        self._shell(scalar, value)

    @staticmethod
    def _started(words: list[str]) -> bool:
        """``ray start`` among the words before (``["ray", "start", ...]``)."""
        return any(a.rsplit("/", 1)[-1] == "ray" and b == "start" for a, b in itertools.pairwise(words))

    def _shell(self, scalar, value: str) -> None:
        data = value.encode("utf-8")
        raw = self.file.data[scalar.start:scalar.end]
        stack = [parse(data).root_node]
        found = []
        while stack:
            node = stack.pop()
            if node.type == "command":
                words = syntax.command_args(node)
                start = ray_start(words)
                if start is not None:
                    options = words[start + 1:]
                    for index, word in enumerate(options):
                        if word.text == "--num-gpus" and index + 1 < len(options):
                            found.append((word.node.start_byte, word.text.encode(), options[index + 1].text))
                        elif word.text.startswith("--num-gpus="):
                            found.append((word.node.start_byte, word.text.encode(), word.text.partition("=")[2]))
            stack.extend(reversed(node.children))
        for offset, text, count in sorted(found):
            if count.isdigit() and int(count) == 0:
                continue
            # the option's place in the file: the same occurrence of its text in the scalar's raw span
            nth = data.count(text, 0, offset)
            at = -1
            for _ in range(nth + 1):
                at = raw.find(text, at + 1)
                if at < 0:
                    break
            position = scalar.start + at if at >= 0 else scalar.start
            self._report_option(position, text.decode("utf-8", "replace"), count)

    def _report_option(self, offset: int, text: str, count: str) -> None:
        lines = self.file.lines
        self.file.recorder.report(
            offset, self.id, f"`ray start {text}` in this command declares GPUs",
            f"declare the NPUs with `--resources='{{\"NPU\": {count}}}'` instead (the YAML string must keep "
            f"the JSON's quotes); {_WHY}", lines.line_start(lines.line(offset)))
