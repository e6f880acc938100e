"""``python -m npu_migrate.emulate [--nproc N] [--strict] SCRIPT [ARGS...]`` and ``--build-only``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m npu_migrate.emulate",
        description="Run a script on npu-migrate's emulated NPU (CPU-backed torch_npu stand-in).",
    )
    parser.add_argument(
        "--nproc", type=int, default=1, help="workers for a torchrun job (default 1)"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="forbid float64 on npu and raise on NPU_MIGRATE_EMULATOR_DENY_OPS",
    )
    parser.add_argument(
        "--build-only",
        action="store_true",
        help="build (or find in the cache) the C++ extension and exit",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show the compiler output"
    )
    parser.add_argument("script", nargs="?")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)

    if ns.build_only:
        from .build import BuildError, build, build_dir, is_built

        cached = is_built()
        try:
            path = build(verbose=ns.verbose)
        except BuildError as exc:
            print(exc, file=sys.stderr)
            return 4
        print(f"{'cached' if cached else 'built'}: {path} (cache dir {build_dir()})")
        return 0
    if ns.script is None:
        parser.error("SCRIPT is required (or --build-only)")

    from .launcher import run

    return run(ns.script, ns.args, nproc=ns.nproc, strict=ns.strict)


if __name__ == "__main__":
    sys.exit(main())
