"""The node preflight on fixture nodes: a clean node passes, and each planted fault
gives exactly one line naming it, with its fix, and exit 1.

A node is a temporary directory: a fake ``/proc/sys`` (``--proc-root``), fake
``npu-smi`` and ``hccn_tool`` executables on ``PATH``, a ranktable file, and the
environment a launcher would set.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from npu_runtime.preflight.cli import main

from ._helpers import free_port, write_ranktable_v1

# The checks run fake npu-smi / hccn_tool / interpreters (and one test the real preflight,
# whose stack probe may take minutes under load): a hung tool must fail the test.
pytestmark = pytest.mark.timeout(400)


def _local_address() -> str:
    """This machine's address on its network (not loopback): a multi-node job's master
    must be reachable from the other nodes, so 127.0.0.1 is itself a problem there."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent; the kernel picks the outgoing address
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


THIS_HOST = _local_address()
OTHER_HOST = "10.0.0.2"

# A clean software stack: what the fake interpreter reports, and the versions on disk.
STACK = {"torch": "2.4.0+cpu", "torch-npu": "2.4.0.post2", "error": None, "npus": 8}
DRIVER_VERSION, CANN_VERSION = "24.1.rc2", "8.0.RC2"


def fake_python(stack: dict) -> str:
    """A stand-in for the job's interpreter: answers the stack probe with ``stack``."""
    return f"#!/bin/sh\necho 'NPU_PREFLIGHT_PROBE {json.dumps(stack)}'\n"

def _case(var: str, values: dict[str, str], default: str) -> str:
    """A shell ``case`` printing values[var] (default ``default``)."""
    arms = "".join(f"{key}) printf '%s' '{value}';; " for key, value in values.items())
    return f'case "{var}" in {arms}*) printf \'%s\' "{default}";; esac'


def npu_smi(state: dict) -> str:
    """A fake npu-smi: ``info -l`` (Total Count, NPU ID, Chip Count) and ``info -t health -i N``;
    ``state["listing"]``, when given, is what ``info -l`` prints instead (exit 0)."""
    if state.get("listing") is not None:
        return (f"#!/bin/sh\nif [ \"$1 $2\" = 'info -l' ]; then printf '%s\\n' '{state['listing']}'; "
                "else echo 'Health Status : OK'; fi\n")
    listing = "".join(f"printf '\\n        NPU ID                         : {i}\\n"
                      f"        Chip Count                     : 1\\n'\n" for i in range(state["count"]))
    fail = "echo 'dcmi module initialize failed. ret is -8005'; exit 1\n" if state.get("fail") else ""
    return (f"#!/bin/sh\nif [ \"$1 $2\" = 'info -l' ]; then\n{fail}"
            f"printf '        Total Count                    : {state['count']}\\n'\n{listing}"
            f"elif [ \"$1 $2 $3\" = 'info -t health' ]; then\n"
            f"printf '        Health Status                  : '; {_case('$5', state['health'], 'OK')}; echo\n"
            "else exit 2; fi\n")


def hccn_tool(state: dict) -> str:
    """A fake hccn_tool: ``-i N -link -g``, ``-i N -net_health -g``, ``-i N -ip -g``."""
    return ("#!/bin/sh\ncase \"$3\" in\n"
            f"-link) printf 'link status: '; {_case('$2', state['link'], 'UP')}; echo;;\n"
            f"-net_health) printf 'net health status: '; {_case('$2', state['health'], 'Success')}; echo;;\n"
            f"-ip) printf 'ipaddr:'; {_case('$2', state['ip'], '192.168.$2.1')}; "
            "printf '\\nnetmask:255.255.255.0\\n';;\nesac\n")


def _table(tmp_path: Path, servers: list[tuple[str, list[int]]]) -> dict:
    """A version 1.0 ranktable (device_ip 192.168.<rank>.1) as a document to plant faults in."""
    return json.loads(write_ranktable_v1(tmp_path / "ranktable-source.json", servers).read_text(encoding="utf-8"))


@dataclass
class Node:
    """A training node in a directory. ``run()`` preflights it as a launcher would."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)
    sysctl: dict[str, str] = field(default_factory=dict)
    npu_smi: dict | None = None
    hccn: dict | None = None
    table: dict | None = None
    stack: dict | None = field(default_factory=lambda: dict(STACK))
    driver: str | None = DRIVER_VERSION
    cann: str | None = CANN_VERSION

    def run(self, *extra: str) -> tuple[int, list[str], str]:
        proc = self.root / "proc"
        for name, value in self.sysctl.items():
            path = proc / "sys" / name.replace(".", "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(value + "\n", encoding="ascii")
        bin_dir = self.root / "bin"
        bin_dir.mkdir(exist_ok=True)
        for name, state, fake in (("npu-smi", self.npu_smi, npu_smi), ("hccn_tool", self.hccn, hccn_tool)):
            tool = bin_dir / name
            tool.unlink(missing_ok=True)
            if state is not None:
                tool.write_text(fake(state), encoding="utf-8")
                tool.chmod(0o755)
        ascend = self.root / "Ascend"
        if self.driver is not None:
            (ascend / "driver").mkdir(parents=True, exist_ok=True)
            (ascend / "driver" / "version.info").write_text(f"Version={self.driver}\n", encoding="utf-8")
        if self.cann is not None:
            info = ascend / "ascend-toolkit" / "latest" / "x86_64-linux" / "ascend_toolkit_install.info"
            info.parent.mkdir(parents=True, exist_ok=True)
            info.write_text(f"package_name=Ascend-cann-toolkit\nversion={self.cann}\n", encoding="utf-8")
        python = self.root / "python-stack"
        python.write_text(fake_python(self.stack) if self.stack is not None else "#!/bin/sh\nexit 127\n",
                          encoding="utf-8")
        python.chmod(0o755)
        dev = self.root / "dev"
        dev.mkdir(exist_ok=True)
        env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "NPU_RUNTIME_HOST_IP": THIS_HOST, **self.env}
        if self.table is not None:
            table = self.root / "hccl.json"
            table.write_text(json.dumps(self.table), encoding="utf-8")
            env.setdefault("RANK_TABLE_FILE", str(table))
        argv = [*(a for k, v in self.flags.items() for a in (f"--{k}", v)), "--proc-root", str(proc),
                "--ranktable-timeout", "0", "--master-wait", "1", "--ascend-root", str(ascend),
                "--python", str(python), "--dev-root", str(dev), *extra]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv, environ=env)
        return code, out.getvalue().splitlines(), err.getvalue()


def _clean_sysctl() -> dict[str, str]:
    return {"net.ipv4.ip_local_reserved_ports": "60000-60015", "net.ipv4.ip_local_port_range": "32768\t60999",
            "net.core.somaxconn": "65535", "net.ipv4.tcp_max_syn_backlog": "65535"}


@pytest.fixture
def torchrun_node(tmp_path) -> Node:
    """Node 0 of 2 x 8, just before the torchrun launcher starts."""
    return Node(tmp_path, env={"HCCL_CONNECT_TIMEOUT": "1200"},
                flags={"nodes": "2", "cards": "8", "node-rank": "0", "master": f"{THIS_HOST}:{free_port()}"},
                sysctl=_clean_sysctl(), npu_smi={"count": 8, "health": {}},
                hccn={"link": {}, "health": {}, "ip": {}})


@pytest.fixture
def ranktable_node(tmp_path) -> Node:
    """Server 0 of a 2 x 8 ranktable job, just before the per-card launcher starts."""
    return Node(tmp_path, env={"HCCL_CONNECT_TIMEOUT": "1200", "RANK_SIZE": "16"},
                flags={"nodes": "2", "cards": "8", "node-rank": "0"},
                sysctl=_clean_sysctl(), npu_smi={"count": 8, "health": {}},
                hccn={"link": {}, "health": {}, "ip": {}},
                table=_table(tmp_path, [(THIS_HOST, list(range(8))), (OTHER_HOST, list(range(8)))]))


@pytest.mark.parametrize("which", ["torchrun_node", "ranktable_node"])
def test_a_clean_node_passes(request, which):
    node = request.getfixturevalue(which)
    code, lines, err = node.run("-v")
    assert (code, lines) == (0, []), err
    assert "is ready (2 node(s) x 8 NPU(s)" in err
    assert "npu-smi: 8 NPU device(s)" in err and "hccn_tool: NPU links checked" in err
    assert (f"found: NPUs 8 (asked: 8 per node), driver {DRIVER_VERSION}, CANN {CANN_VERSION}, torch 2.4.0+cpu, "
            "torch_npu 2.4.0.post2") in err


def test_a_node_without_npus_is_never_ready(torchrun_node):
    # No npu-smi, no /dev/davinci*, no driver, no CANN, torch without torch_npu: what a CPU machine has.
    torchrun_node.npu_smi = torchrun_node.hccn = None
    torchrun_node.driver = torchrun_node.cann = None
    torchrun_node.stack = {"torch": "2.13.0+cpu", "torch-npu": None, "error": None}
    torchrun_node.flags["nodes"] = "1"
    code, lines, err = torchrun_node.run()
    assert code == 1 and "ready" not in err, err
    assert [line.split(":")[0] for line in lines] == ["npus", "stack", "stack", "stack"], lines
    assert lines[0].startswith("npus: no NPU on this node: no npu-smi and no ")
    assert "no Ascend driver" in lines[1] and "no CANN" in lines[2]
    assert lines[3].startswith("stack: torch_npu is not installed for ")
    assert "found: NPUs none (asked: 8 per node), driver none, CANN none, torch 2.13.0+cpu, torch_npu none" in err
    assert "preflight: 4 problem(s)" in err


@pytest.mark.timeout(300)
def test_a_torch_npu_package_of_another_torch_is_one_line(tmp_path):
    """A real (fake) torch_npu distribution beside this machine's torch, asked of a real
    interpreter: its version does not pair with torch, whatever its import then does."""
    site = tmp_path / "site"
    (site / "torch_npu").mkdir(parents=True)
    (site / "torch_npu" / "__init__.py").write_text("__version__ = '2.1.0.post3'\n", encoding="utf-8")
    meta = site / "torch_npu-2.1.0.post3.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-npu\nVersion: 2.1.0.post3\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "npu_runtime.preflight", "--nodes", "1", "--cards", "8",
                           "--ascend-root", str(tmp_path / "none")], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONPATH": str(site)}, check=False)
    stack = [line for line in proc.stdout.splitlines() if line.startswith("stack: torch")]
    assert proc.returncode == 1 and len(stack) == 1, proc.stdout
    assert "and torch_npu 2.1.0.post3 do not pair (torch_npu X.Y needs torch X.Y)" in stack[0]
    assert "torch_npu 2.1.0.post3" in proc.stderr and "is ready" not in proc.stderr
    assert not [line for line in proc.stdout.splitlines() if line.startswith("stack: import torch_npu")]


def test_the_nnae_package_counts_as_cann(torchrun_node):
    """Training images often carry CANN's deployment package (nnae) instead of the toolkit."""
    torchrun_node.cann = None
    info = torchrun_node.root / "Ascend" / "nnae" / "latest" / "aarch64-linux" / "ascend_nnae_install.info"
    info.parent.mkdir(parents=True)
    info.write_text("package_name=Ascend-cann-nnae\nversion=8.0.RC3\n", encoding="utf-8")
    code, lines, err = torchrun_node.run()
    assert (code, lines) == (0, []), err
    assert "CANN 8.0.RC3" in err


def test_device_files_without_npu_smi_are_a_problem_too(torchrun_node):
    torchrun_node.npu_smi = None
    torchrun_node.run()  # creates the node's directories
    (torchrun_node.root / "dev" / "davinci0").write_text("", encoding="utf-8")
    _assert_one(torchrun_node, "npus", "npu-smi not found", "davinci0 exists")


def test_the_real_preflight_on_this_cpu_machine_is_not_ready():
    # Whatever this machine is, it has no Ascend NPU: the preflight must say so, not "ready".
    proc = subprocess.run([sys.executable, "-m", "npu_runtime.preflight", "--nodes", "1", "--cards", "8"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "is ready" not in proc.stderr
    assert any(line.startswith("npus: no NPU on this node") for line in proc.stdout.splitlines()), proc.stdout


def _assert_one(node: Node, area: str, *expected: str) -> str:
    code, lines, err = node.run()
    assert code == 1, (lines, err)
    assert len(lines) == 1, lines
    [line] = lines
    assert line.startswith(f"{area}: ") and "; fix: " in line, line
    for text in expected:
        assert text in line, line
    return line


# --- planted faults: (what to change on the node, the one line expected) ----------------

DELETE = object()
DEV0, DEV1 = ("table", "server_list", 0, "device"), ("table", "server_list", 1, "device")

ON_RANKTABLE_NODE = {
    "ranktable not completed": ({("table", "status"): "initializing"},
                                "ranktable", "field status is 'initializing'", "wait until the scheduler"),
    "duplicate ranks": ({(*DEV1, 0, "rank_id"): "3"}, "ranktable", "duplicate rank_id [3]"),
    "ranks not dense": ({(*DEV1, 7, "rank_id"): "20"}, "ranktable", "are not 0..15"),
    "device id beyond the NPUs": ({(*DEV1, 7, "device_id"): "9"}, "ranktable",
                                  "rank_id 15 on server 10.0.0.2 has device_id 9, outside 0..7", "npu-smi lists 8 NPUs"),
    "device twice on a server": ({(*DEV1, 7, "device_id"): "6"}, "ranktable",
                                 "server 10.0.0.2 gives device_id 6 to 2 ranks"),
    "this host not listed": ({("table", "server_list", 0, "server_id"): "10.0.0.9",
                              ("table", "server_list", 0, "host_ip"): "10.0.0.9"}, "launch env",
                             "no server_id/host_ip matches this host", "NPU_RUNTIME_HOST_IP"),
    "card on the wrong device": ({(*DEV0, 0, "rank_id"): "1", (*DEV0, 1, "rank_id"): "0"}, "launch env",
                                 "card 0 of node 0 would start as RANK_ID=0", "gives device_id 1 to RANK_ID=0"),
    "no device ip between servers": ({(*DEV1, 2, "device_ip"): DELETE}, "ranktable",
                                     "rank_id 10 (server 10.0.0.2, device 2) has no device_ip"),
    "RANK_SIZE differs from the table": ({("env", "RANK_SIZE"): "8"}, "launch env", "RANK_SIZE=8 but ranktable",
                                         "lists 16 devices"),
    "HCCL_CONNECT_TIMEOUT unset": ({("env", "HCCL_CONNECT_TIMEOUT"): DELETE}, "hccl",
                                   "HCCL_CONNECT_TIMEOUT is unset (HCCL waits 120 s) with a ranktable",
                                   "export HCCL_CONNECT_TIMEOUT=1200"),
    "HCCL_CONNECT_TIMEOUT short": ({("env", "HCCL_CONNECT_TIMEOUT"): "200"}, "hccl",
                                   "HCCL_CONNECT_TIMEOUT=200 with a ranktable", "torch_npu warns below 300"),
    "RoCE address differs": ({("hccn", "ip"): {"1": "192.168.100.250"}}, "roce",
                             "NPU 1: hccn_tool -i 1 -ip -g says 192.168.100.250",
                             "the ranktable gives device_ip 192.168.1.1"),
}

ON_TORCHRUN_NODE = {
    "sources disagree on the world size": ({("env", "WORLD_SIZE"): "8"}, "launch env", "disagree on the world size",
                                           "WORLD_SIZE says 8", "--nodes x --cards says 16"),
    "sources disagree on NPUs per node": ({("env", "MA_NUM_GPUS"): "4"}, "launch env",
                                          "disagree on the NPUs per node", "MA_NUM_GPUS says 4", "--cards says 8"),
    "sources disagree on the master": ({("env", "MASTER_ADDR"): "192.0.2.77"}, "launch env",
                                       "disagree on the master address", "MASTER_ADDR says 192.0.2.77"),
    "CUDA_VISIBLE_DEVICES left over": ({("env", "CUDA_VISIBLE_DEVICES"): "0,1"}, "launch env",
                                       "CUDA_VISIBLE_DEVICES='0,1' is set, but NPUs ignore it",
                                       "ASCEND_RT_VISIBLE_DEVICES"),
    "fewer visible NPUs than processes": ({("env", "ASCEND_RT_VISIBLE_DEVICES"): "0,1,2,3"}, "launch env",
                                          "shows 4 NPU(s) but the job starts 8 process(es) per node"),
    "unsupported NPUs per node": ({("flags", "cards"): "6", ("flags", "nodes"): "1"}, "npus",
                                  "6 processes (NPUs) per node", "use 1, 2, 4, 8 NPUs per node"),
    "HCCL ports not reserved": ({("sysctl", "net.ipv4.ip_local_reserved_ports"): "8080"}, "sysctl",
                                "HCCL's ports 60000-60015 are not all reserved",
                                "sysctl -w net.ipv4.ip_local_reserved_ports=8080,60000-60015"),
    "HCCL base port moves the range": ({("env", "HCCL_IF_BASE_PORT"): "50000"}, "sysctl",
                                       "HCCL's ports 50000-50015 are not all reserved",
                                       "ip_local_reserved_ports=60000-60015,50000-50015"),
    "somaxconn below the job": ({("sysctl", "net.core.somaxconn"): "8"}, "sysctl",
                                "net.core.somaxconn=8 is below the job's 16 processes",
                                "sysctl -w net.core.somaxconn=65535"),
    "SYN backlog below the job": ({("sysctl", "net.ipv4.tcp_max_syn_backlog"): "10"}, "sysctl",
                                  "net.ipv4.tcp_max_syn_backlog=10 is below the job's 16 processes"),
    "MASTER_PORT among HCCL's ports": ({("flags", "master"): f"{THIS_HOST}:60005"}, "hccl",
                                       "MASTER_PORT 60005 is one of HCCL's ports 60000-60015"),
    "master does not resolve": ({("flags", "master"): "no-such-master.invalid:29500", ("flags", "node-rank"): "1"},
                                "rendezvous", "MASTER_ADDR no-such-master.invalid does not resolve"),
    # TEST-NET-1 addresses never answer.
    "master unreachable": ({("flags", "master"): "192.0.2.10:29500", ("flags", "node-rank"): "1"}, "rendezvous",
                           "cannot reach MASTER_ADDR 192.0.2.10:29500", "open TCP port 29500"),
    "node 0 away from the master": ({("flags", "master"): "192.0.2.10:29500"}, "rendezvous",
                                    "this is node 0, which hosts the rendezvous", "is not an address of this host"),
    "master address on node 1": ({("flags", "node-rank"): "1"}, "rendezvous", "is this host, but this is node 1"),
    "unhealthy NPU": ({("npu_smi", "health"): {"3": "Alarm"}}, "npus", "NPU 3 reports health Alarm",
                      "ASCEND_RT_VISIBLE_DEVICES"),
    "fewer NPUs than processes": ({("npu_smi", "count"): 4}, "npus",
                                  "starts 8 processes per node but npu-smi lists 4 NPU(s)"),
    "node rank beyond the nodes": ({("flags", "node-rank"): "2"}, "launch env",
                                   "--node-rank says this is node 2, but the job has 2 node(s) (0..1)"),
    "NODE_RANK beyond the nodes": ({("flags", "node-rank"): DELETE, ("env", "NODE_RANK"): "5"}, "launch env",
                                   "NODE_RANK says this is node 5, but the job has 2 node(s)"),
    "NODE_RANK not a number": ({("flags", "node-rank"): DELETE, ("env", "NODE_RANK"): "one"}, "launch env",
                               "NODE_RANK='one' is not an integer"),
    # NODE_RANK alone (no --node-rank) places the node: node 1 must not host the master.
    "NODE_RANK 1 on the master address": ({("flags", "node-rank"): DELETE, ("env", "NODE_RANK"): "1"}, "rendezvous",
                                          "is this host, but this is node 1"),
    "npu-smi prints nothing": ({("npu_smi", "listing"): ""}, "npus", "printed no NPU list (no output)"),
    "npu-smi prints an error with exit 0": ({("npu_smi", "listing"): "Error: dcmi module initialize failed"}, "npus",
                                            "printed no NPU list (Error: dcmi module initialize failed)"),
    "npu-smi prints a count without NPUs": ({("npu_smi", "listing"): "Total Count : 8"}, "npus",
                                            "Total Count : 8 but no NPU ID line", "health are unknown"),
    "npu-smi lists fewer NPUs than its count": (
        {("npu_smi", "listing"): "Total Count : 8\nNPU ID : 0\nChip Count : 1"}, "npus",
        "says Total Count : 8 but lists 1 NPU ID(s) (0)"),
    "npu-smi lists no NPU": ({("npu_smi", "listing"): "Total Count : 0"}, "npus", "npu-smi lists no NPU on this node"),
    "HCCL_CONNECT_TIMEOUT not a number": ({("env", "HCCL_CONNECT_TIMEOUT"): "20m"}, "hccl",
                                          "HCCL_CONNECT_TIMEOUT='20m' is not a whole number of seconds"),
    "HCCL_CONNECT_TIMEOUT below its range": ({("env", "HCCL_CONNECT_TIMEOUT"): "60"}, "hccl",
                                             "HCCL_CONNECT_TIMEOUT='60' is outside HCCL's range 120-7200"),
    "HCCL_EXEC_TIMEOUT not a number": ({("env", "HCCL_EXEC_TIMEOUT"): "30m"}, "hccl", "HCCL_EXEC_TIMEOUT='30m'"),
    "visible devices with an empty id": ({("env", "ASCEND_RT_VISIBLE_DEVICES"): "0,,1,2,3,4,5,6,7"}, "npus",
                                         "is not a comma-separated list of NPU ids"),
    "visible device repeated": ({("env", "ASCEND_RT_VISIBLE_DEVICES"): "0,0,1,2,3,4,5,6"}, "npus",
                                "is not ascending (or repeats an id)"),
    "NPU driver broken": ({("npu_smi", "fail"): True}, "npus",
                          "`npu-smi info -l` failed (exit 1): dcmi module initialize failed"),
    "torch and torch_npu do not pair": ({("stack", "torch-npu"): "2.3.1"}, "stack",
                                        "torch 2.4.0+cpu and torch_npu 2.3.1 do not pair"),
    "torch_npu of another torch, failing to import": (
        {("stack", "torch-npu"): "2.1.0.post3", ("stack", "error"): "ImportError: undefined symbol: _ZN3c10"},
        "stack", "torch 2.4.0+cpu and torch_npu 2.1.0.post3 do not pair",
        "; import torch_npu fails: ImportError: undefined symbol"),
    "torch_npu does not import": ({("stack", "error"): "OSError: libhccl.so: cannot open shared object file"},
                                  "stack", "import torch_npu fails: OSError: libhccl.so", "set_env.sh"),
    "torch_npu sees no NPU": ({("stack", "npus"): 0}, "stack", "sees 0 NPUs"),
    "no driver": ({("driver",): None}, "stack", "no Ascend driver"),
    "no CANN": ({("cann",): None}, "stack", "no CANN", "set_env.sh"),
    "interpreter without torch": ({("stack", "torch"): None, ("stack", "torch-npu"): None}, "stack", "torch"),
    "loopback master in a 2-node job": ({("flags", "master"): "127.0.0.1:29500"}, "rendezvous",
                                        "MASTER_ADDR 127.0.0.1 is a loopback address in a 2-node job"),
    "no node rank in a 2-node job": ({("flags", "node-rank"): DELETE}, "launch env",
                                     "no node rank in a 2-node job", "NODE_RANK=K"),
    "HCCL_EXEC_TIMEOUT not a multiple of 68 on Atlas training": (
        {("flags", "accelerator"): "ascend-910", ("env", "HCCL_EXEC_TIMEOUT"): "1800"}, "hccl",
        "HCCL_EXEC_TIMEOUT=1800 on an Atlas training server", "export HCCL_EXEC_TIMEOUT=1836"),
    "HCCL_EXEC_TIMEOUT above its range": ({("env", "HCCL_EXEC_TIMEOUT"): "2147483648"}, "hccl",
                                          "above HCCL's range 0-2147483647"),
    "HCCL_CONNECT_TIMEOUT above its range": ({("env", "HCCL_CONNECT_TIMEOUT"): "9000"}, "hccl",
                                             "outside HCCL's range 120-7200"),
    "visible devices not ascending": ({("env", "ASCEND_RT_VISIBLE_DEVICES"): "1,0,2,3,4,5,6,7"}, "npus",
                                      "is not ascending"),
    "visible device beyond the node": ({("env", "ASCEND_RT_VISIBLE_DEVICES"): "0,1,2,3,4,5,6,9"}, "npus",
                                       "names NPU 9, but npu-smi lists 8"),
    "visible devices not ids": ({("env", "ASCEND_RT_VISIBLE_DEVICES"): "0,1,a,3,4,5,6,7"}, "npus",
                                "is not a comma-separated list of NPU ids"),
    "NPU link down": ({("hccn", "link"): {"2": "DOWN"}}, "roce", "NPU 2: link is DOWN", "optical module"),
    "NPU network unhealthy": ({("hccn", "health"): {"5": "Init"}}, "roce", "NPU 5: net health is Init",
                              "hccn_tool -i 5 -netdetect -g"),
}


def _plant(node: Node, changes: dict[tuple, object]) -> None:
    for (attr, *path), value in changes.items():
        parent, key = (node, attr) if not path else (getattr(node, attr), path[-1])
        for step in path[:-1]:
            parent = parent[step]
        if value is DELETE:
            del parent[key]
        elif parent is node:
            setattr(node, key, value)
        else:
            parent[key] = value


@pytest.mark.parametrize("fault", ON_RANKTABLE_NODE)
def test_planted_fault_on_a_ranktable_node(ranktable_node, fault):
    changes, area, *expected = ON_RANKTABLE_NODE[fault]
    _plant(ranktable_node, changes)
    _assert_one(ranktable_node, area, *expected)


@pytest.mark.parametrize("fault", ON_TORCHRUN_NODE)
def test_planted_fault_on_a_torchrun_node(torchrun_node, fault):
    changes, area, *expected = ON_TORCHRUN_NODE[fault]
    _plant(torchrun_node, changes)
    _assert_one(torchrun_node, area, *expected)


def test_ranktable_unsupported_npus_per_server(tmp_path, ranktable_node):
    ranktable_node.table = _table(tmp_path, [(THIS_HOST, [0, 1, 2]), (OTHER_HOST, [0, 1, 2])])
    ranktable_node.env["RANK_SIZE"] = "6"
    ranktable_node.flags["cards"] = "3"
    _assert_one(ranktable_node, "ranktable", f"server {THIS_HOST} has 3 NPUs",
                "Atlas training servers take 1, 2, 4, 8 NPUs per server")


def test_a_16_npu_server_with_a_version_1_0_table_passes(tmp_path, ranktable_node):
    """The Atlas 200T A2 Box16: npu-smi lists 16 NPUs, and the Ascend Operator writes a
    version 1.0 table (1.2 is for A3 SuperPoD jobs) with 16 devices per server."""
    ranktable_node.npu_smi = {"count": 16, "health": {}}
    ranktable_node.table = _table(tmp_path, [(THIS_HOST, list(range(16))), (OTHER_HOST, list(range(16)))])
    ranktable_node.env["RANK_SIZE"] = "32"
    ranktable_node.flags["cards"] = "16"
    code, lines, err = ranktable_node.run()
    assert (code, lines) == (0, []), err
    ranktable_node.npu_smi = {"count": 8, "health": {}}  # an 8-NPU server given the same table
    code, lines, _err = ranktable_node.run()
    assert code == 1 and any("has 16 NPUs; Atlas training servers take 1, 2, 4, 8 NPUs per server" in line
                             for line in lines), lines


def test_an_environment_init_distributed_would_reject(tmp_path):
    node = Node(tmp_path, env={"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": THIS_HOST, "MASTER_PORT": "29500"},
                npu_smi={"count": 8, "health": {}})
    _assert_one(node, "launch env", "RANK=2 is not below WORLD_SIZE=2", "init_distributed() stops on it too")


def test_volcano_pod_environment_is_understood(torchrun_node):
    # The env and svc plugins of the generated Volcano Job, on its second pod.
    torchrun_node.flags.update({"node-rank": "1", "master": f"job-worker-0.job:{free_port()}"})
    torchrun_node.env.update({"VC_TASK_INDEX": "1", "VK_TASK_INDEX": "1", "VC_WORKER_NUM": "2",
                              "VC_WORKER_HOSTS": "job-worker-0.job,job-worker-1.job"})
    code, lines, _ = torchrun_node.run()
    # This machine cannot resolve the pod names: that, and only that, is reported.
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith("rendezvous: MASTER_ADDR job-worker-0.job does not resolve"), lines
    torchrun_node.env["VC_TASK_INDEX"] = "0"
    code, lines, _ = torchrun_node.run()
    assert any("disagree on the node rank" in line and "VC_TASK_INDEX says 0" in line for line in lines), lines


def test_hccl_ports_outside_the_ephemeral_range_need_no_reservation(torchrun_node):
    torchrun_node.sysctl.update({"net.ipv4.ip_local_reserved_ports": "", "net.ipv4.ip_local_port_range": "20000\t40000"})
    assert torchrun_node.run()[:2] == (0, [])


def test_master_port_taken(torchrun_node):
    host, port = torchrun_node.flags["master"].split(":")
    with socket.socket() as holder:
        holder.bind((host, int(port)))
        holder.listen()
        _assert_one(torchrun_node, "rendezvous", f"MASTER_PORT {port} on this host (the master) is taken",
                    f"ss -ltnp 'sport = :{port}'")


def test_single_node_job_skips_the_multi_node_checks(torchrun_node):
    torchrun_node.flags["nodes"] = "1"
    torchrun_node.sysctl["net.ipv4.ip_local_reserved_ports"] = ""
    torchrun_node.hccn["link"] = {"0": "DOWN"}
    assert torchrun_node.run()[:2] == (0, [])


def test_several_faults_give_one_line_each(torchrun_node):
    torchrun_node.sysctl.update({"net.ipv4.ip_local_reserved_ports": "", "net.core.somaxconn": "4"})
    torchrun_node.npu_smi["health"] = {"0": "Warning"}
    code, lines, err = torchrun_node.run()
    assert code == 1 and len(lines) == 3, lines
    assert "preflight: 3 problem(s)" in err


# --- the command line ---------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--nodes", "0"], ["--master", "host"], ["--master", "h:99999"], ["--bogus"],
                                  ["--ranktable-timeout", "nan"], ["--ranktable-timeout", "inf"],
                                  ["--master-wait", "-1"], ["--master-wait", "nan"]])
def test_bad_options_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv, environ={})
    assert exc.value.code == 2


def _preflight_subprocess(args: list[str], env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, check=False)


def test_runs_where_torch_cannot_be_imported(tmp_path):
    block_torch = textwrap.dedent("""\
        import importlib.abc, runpy, sys
        class NoTorch(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is not installed on this node")
        sys.meta_path.insert(0, NoTorch())
        sys.argv[0] = "preflight"
        runpy.run_module("npu_runtime.preflight", run_name="__main__")
    """)
    env = {"WORLD_SIZE": "4", "RANK_SIZE": "2", "PATH": "/usr/bin:/bin"}
    proc = _preflight_subprocess(["--proc-root", str(tmp_path)], env, block_torch)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("launch env: the sources disagree on the world size"), proc.stdout
    assert "Traceback" not in proc.stderr


def test_npu_migrate_preflight_is_the_same_program(torchrun_node, run_cli):
    torchrun_node.sysctl["net.core.somaxconn"] = "8"
    code, lines, _ = torchrun_node.run()
    argv = [*(a for k, v in torchrun_node.flags.items() for a in (f"--{k}", v)),
            "--proc-root", str(torchrun_node.root / "proc"), "--master-wait", "1",
            "--ascend-root", str(torchrun_node.root / "Ascend"), "--python", str(torchrun_node.root / "python-stack"),
            "--dev-root", str(torchrun_node.root / "dev")]
    proc = subprocess.run([sys.executable, "-m", "npu_migrate", "preflight", *argv], capture_output=True, text=True,
                          timeout=120, check=False,
                          env={**os.environ, "PATH": f"{torchrun_node.root / 'bin'}:/usr/bin:/bin",
                               "NPU_RUNTIME_HOST_IP": THIS_HOST, "HCCL_CONNECT_TIMEOUT": "1200"})
    assert (proc.returncode, proc.stdout.splitlines()) == (code, lines)
