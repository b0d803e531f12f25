"""GPU check: env and PPO throughput on CUDA, and one markdown table with the test results.

Run through ``benchmarks/gpu_check.sh`` (which first runs the CUDA-only tests and one generation
through a real Celery GPU worker and passes their logs here). On a CUDA machine it measures:

* ``StockTradingVecEnv`` steps per second at 4,096 and 65,536 envs, as written (eager) and with
  the step compiled by ``torch.compile(mode="reduce-overhead")`` (Inductor kernels replayed as
  CUDA graphs; possible because the accelerator path of the step has no host sync);
* PPO training env-steps per second (rollouts and updates, ``PPOConfig`` defaults) at the same
  sizes;

and prints one table. ``--dry-run`` runs the same code on the CPU with 64 and 256 envs and a
``torch.compile`` backend that needs no compiler (``eager``), to show the script works; its
figures say nothing about a GPU.

Usage: ``.venv/bin/python benchmarks/gpu_check.py [--dry-run] [--tests-log F --worker-log F]``
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from train_throughput import measure_ours  # noqa: E402

from trainer.agents.ppo import PPOConfig  # noqa: E402
from trainer.data.pipeline import load_market_data  # noqa: E402
from trainer.envs import EnvConfig, StockTradingVecEnv  # noqa: E402
from trainer.pod import TaskSpec, demo_task_dict  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def env_rate(data, device: torch.device, num_envs: int, steps: int, variant: str, dry_run: bool) -> str:
    """Env steps per second of ``steps`` vector steps, after 10 warm-up steps."""
    # the accelerator path (the defaults on CUDA; forced in the dry run to exercise it)
    env = StockTradingVecEnv(
        data, EnvConfig(), num_envs=num_envs, device=device, seed=0, sync_free=True, share_dtype=torch.float32
    )
    gen = torch.Generator(device=device).manual_seed(0)
    actions = torch.rand((8, num_envs, env.action_dim), device=device, generator=gen) * 2 - 1
    step = env._step
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    if variant == "torch.compile":
        if dry_run:
            step = torch.compile(env._step, backend="eager")
        else:
            step = torch.compile(env._step, mode="reduce-overhead")
    try:
        with torch.no_grad():
            for i in range(10):
                step(actions[i % 8])
            _sync(device)
            start = time.perf_counter()
            for i in range(steps):
                step(actions[i % 8])
            _sync(device)
            elapsed = time.perf_counter() - start
    except Exception as exc:  # a failed variant is a result of the check, not the end of it
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"failed: {type(exc).__name__}: {first[:120]}"
    rate = f"{num_envs * steps / elapsed:,.0f} env-steps/s"
    if variant == "torch.compile":
        breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
        rate += f" ({breaks} graph break{'s' if breaks != 1 else ''})"
    return rate


def ppo_rate(train, device: torch.device, num_envs: int, rollouts: int) -> str:
    hp = PPOConfig().to_dict()
    try:
        result = measure_ours(
            train,
            device=device,
            env_steps=rollouts * hp["rollout_steps"] * num_envs,
            num_envs=num_envs,
            hyperparameters=hp,
        )
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"failed: {type(exc).__name__}: {first[:120]}"
    return f"{result['steps_per_s']:,.0f} env-steps/s"


def pytest_summary(log: Path | None, *, cuda: bool) -> str:
    """One cell from a pytest log: its final counts, and FAIL when anything failed, or (with
    CUDA) when a CUDA-only test was skipped."""
    if log is None or not log.exists():
        return "not run"
    text = log.read_text(errors="replace")
    lines = [ln for ln in text.splitlines() if re.search(r"\d+ (passed|failed|error|skipped)", ln)]
    summary = lines[-1].strip("= ") if lines else "no summary (see the log)"
    failed = re.search(r"\d+ (failed|error)", summary) is not None or not lines
    skipped = re.search(r"\d+ skipped", summary) is not None
    verdict = "FAIL" if failed or (cuda and skipped) else "ok"
    return f"{verdict}: {summary}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, small sizes: shows the script runs")
    parser.add_argument("--tests-log", type=Path, default=None)
    parser.add_argument("--worker-log", type=Path, default=None)
    parser.add_argument(
        "--data-dir", default=os.environ.get("PADDOCK_DATA_DIR") or str(REPO.parent / "shared" / "data")
    )
    args = parser.parse_args()

    cuda = torch.cuda.is_available() and not args.dry_run
    if not cuda and not args.dry_run:
        sys.exit("gpu_check: no CUDA device; use --dry-run")
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    torch.set_num_threads(1)
    sizes = [4096, 65536] if cuda else [64, 256]
    env_steps = 500 if cuda else 20
    rollouts = 3 if cuda else 1

    task = TaskSpec.from_dict(demo_task_dict())
    market = load_market_data(task.data, data_dir=args.data_dir)
    train = market.slice(*task.train, name="train")
    name = torch.cuda.get_device_name(device) if cuda else "cpu (dry run)"

    rows = [
        ("CUDA-only tests", name, "-", "pytest", pytest_summary(args.tests_log, cuda=cuda)),
        ("one generation, real Celery worker", name, "-", "pytest", pytest_summary(args.worker_log, cuda=cuda)),
    ]
    for n in sizes:
        for variant in ("eager", "torch.compile"):
            rows.append(("env step", name, f"{n:,}", variant, env_rate(train, device, n, env_steps, variant, not cuda)))
    for n in sizes:
        rows.append(("PPO learn (defaults)", name, f"{n:,}", "eager", ppo_rate(train, device, n, rollouts)))

    print(f"\ntorch {torch.__version__}; {'CUDA ' + torch.version.cuda if cuda else 'dry run on the CPU'}\n")
    print("| check | device | num_envs | variant | result |")
    print("|---|---|---:|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
