"""``ranktable.sh``: one process per card, routed by an HCCL ranktable.

The per-card mode of the Ascend guides and ModelArts' Ascend engine: each card's
process gets ``RANK_TABLE_FILE``, ``RANK_ID``, ``RANK_SIZE`` and ``DEVICE_ID`` /
``ASCEND_DEVICE_ID``. Card *i* of node *k* is rank ``k * cards + i`` on device *i*, the
order in which hccl_tools.py and ModelArts write ranktables; the preflight checks every
card against the table before anything starts. ``npu_runtime.install()`` (rule NPU701)
turns these variables into torch's, so the script's own ``init_process_group()`` works.
"""

from __future__ import annotations

from .. import shell
from ..artifacts import Artifact
from ..plan import LaunchPlan

FILE = "ranktable.sh"


def render(plan: LaunchPlan) -> list[Artifact]:
    path = plan.out_path(FILE)
    usage = [f"RANK_TABLE_FILE=/path/to/hccl.json NODE_RANK={k} bash {path}   # on the table's server {k}"
             for k in range(min(plan.nodes, 2))]
    if plan.nodes > 2:
        usage.append(f"... up to NODE_RANK={plan.nodes - 1}")
    notes = [
        f"Card i of node k runs {plan.entry} as RANK_ID=k*NPROC_PER_NODE+i on DEVICE_ID=i, the order",
        "hccl_tools.py and ModelArts write ranktables in (the preflight checks each card against the table).",
        "npu_runtime.install(), which npu-migrate adds to the entry script (rule NPU701), turns RANK_ID,",
        "RANK_SIZE and RANK_TABLE_FILE into torch's variables; MASTER_ADDR defaults to the table's first server.",
        "Each rank logs to $LOG_DIR/rank_<RANK_ID>.log; when one fails, the others are stopped, the logs",
        "diagnosed (npu_runtime.diagnose) and the node restarted by exit class (NPU_MAX_RESTARTS).",
    ]
    text = (
        shell.header(plan, f"Start {plan.entry} once per NPU from an HCCL ranktable on "
                           f"{plan.nodes} node(s) x {plan.cards} NPU(s).", usage, notes)
        + shell.strict_mode_and_root(plan)
        + "\n"
        + "export RANK_TABLE_FILE=${RANK_TABLE_FILE:?set RANK_TABLE_FILE to the HCCL ranktable "
          "(the JSON file, or the directory holding jobstart_hccl.json)}\n"
        + "# The job's shape; NODE_RANK is this server's position in the ranktable (required with several).\n"
        + shell.shape(plan)
        + "export RANK_SIZE=$((NNODES * NPROC_PER_NODE))\n"
        + "export " + shell.default("MASTER_PORT", str(plan.master_port)) + "\n"
        + shell.python_default(plan)
        + shell.default("LOG_DIR", "logs") + "\n"
        + "\n" + shell.cann_env()
        + "\n" + shell.hccl_block(plan)
        + "\n" + shell.preflight(plan, master=False)
        + "\n" + shell.restart_policy(plan)
        + f"""
mkdir -p "$LOG_DIR"
pids=()
trap 'kill "${{pids[@]}}" 2>/dev/null || true' INT TERM
restarts=0
while :; do
  pids=()
  logs=()
  suffix=""
  ((restarts == 0)) || suffix=".restart$restarts"
  for ((card = 0; card < NPROC_PER_NODE; card++)); do
    rank=$((NODE_RANK * NPROC_PER_NODE + card))
    log="$LOG_DIR/rank_$rank$suffix.log"
    RANK_ID=$rank DEVICE_ID=$card ASCEND_DEVICE_ID=$card \\
      "$PYTHON" {shell.entry_command(plan)} >"$log" 2>&1 &
    pids+=("$!")
    logs+=("$log")
    echo "rank $rank on device $card: pid $!, log $log"
  done

  # A rank that fails leaves the others waiting in collectives until HCCL times out: stop them.
  status=0
  for ((n = 0; n < NPROC_PER_NODE; n++)); do
    wait -n && continue
    code=$?
    if ((status == 0)); then
      status=$code
      echo "a rank exited with status $code: stopping the others (logs in $LOG_DIR/)" >&2
      kill "${{pids[@]}}" 2>/dev/null || true
    fi
  done
  ((status == 0)) && exit 0
  diagnose "${{logs[@]}}"
  status=$(classified "$status")
  restart_wanted "$status" "$restarts" || exit "$status"
  restarts=$((restarts + 1))
done
"""
    )
    return [Artifact(path, text, executable=True)]
