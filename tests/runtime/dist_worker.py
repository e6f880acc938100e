"""Child process for the launcher tests: join the group and report what it resolved.

--mode init: npu_runtime.init_distributed(); --mode install: npu_runtime.install() then the
script's own torch.distributed.init_process_group("gloo") with env://, unchanged.
"""

import argparse
import json
import os
import sys

import npu_runtime
import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["init", "install"], default="init")
    ap.add_argument("--local-rank", type=int, default=None)
    args = ap.parse_args()
    if args.mode == "init":
        info = npu_runtime.init_distributed(local_rank=args.local_rank)
        report = {"rank": info.rank, "local_rank": info.local_rank, "world_size": info.world_size,
                  "local_world_size": info.local_world_size, "backend": info.backend,
                  "device": str(info.device), "source": info.source}
    else:
        rep = npu_runtime.install(watchdog=False)
        assert npu_runtime.install() is rep  # idempotent
        assert not dist.is_initialized()  # install never creates the group
        dist.init_process_group("gloo")  # the user's own call, untouched
        report = {"rank": dist.get_rank(), "local_rank": int(os.environ["LOCAL_RANK"]),
                  "world_size": dist.get_world_size(), "source": rep.source}
    t = torch.tensor([float(report["rank"] + 1)])
    dist.all_reduce(t)
    report["allreduce"] = t.item()
    report["HCCL_CONNECT_TIMEOUT"] = os.environ.get("HCCL_CONNECT_TIMEOUT")
    # One write() per line: two ranks share torchrun's stdout, and print() may split
    # the text and the newline into two writes that interleave with the other rank.
    sys.stdout.write("REPORT " + json.dumps(report) + "\n")
    sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
