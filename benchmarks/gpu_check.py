"""The device check: what a lent GPU machine must show, in one call of under 8 minutes.

Trainer only (no Django, no services, no network): it runs on the machine's own ``python3`` and
torch, with the few packages that image lacks carried as wheels and a small slice of the real
Dow-30 data carried beside them, both in the ignored folder ``.devicecheck/`` (made here by
``python benchmarks/gpu_check.py prepare``; see ``docs/gpu.md``). Phases, each time-capped and
each printing one JSON line as soon as it finishes (``{"phase": ..., "status": "ok" | "failed" |
"timeout" | "skipped", ...}``):

1. ``env_eager``: both market envs' default (sync-free, float32) step at 1,024 / 4,096 / 65,536
   envs: env-steps/s, and host syncs counted by ``torch.cuda.set_sync_debug_mode("warn")``;
2. ``env_compiled``: ``torch.compile(env.step, fullgraph=True)`` against eager (largest
   difference, rate);
3. ``env_cuda_graph``: the step captured as a CUDA graph (:mod:`trainer.envs.graphed`)
   against eager (rate);
4. ``ppo_learn`` / ``sac_learn``: learning on the device, seconds in collection and in updates,
   peak device memory;
5. ``export_cpu``: one generation trained on the device (:func:`trainer.pod.run_generation`,
   which scores it on the CPU), its checkpoint exported as a bundle and the bundle's policy
   run on the CPU against the checkpoint's.

``--dry-run`` runs every phase tiny on the CPU (in the test suite, so the script cannot rot);
its figures say nothing about a GPU.

Usage::

    python benchmarks/gpu_check.py prepare            # here: .devicecheck/{data,wheels}
    bash benchmarks/gpu_check.sh                      # there: installs the wheels, runs the check
    python benchmarks/gpu_check.py run --dry-run      # anywhere, < 1 minute
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: the carried folder (ignored by git)
CHECK_DIR = REPO / ".devicecheck"
DOW30_FILE = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
#: the carried slice: every Dow ticker, 2016-2020 (train 2016-2019, validation and test in 2020)
SLICE = ("2016-01-01", "2020-12-31")
#: wheels the accelerator image lacks (its numpy, pandas, scipy, pyarrow, safetensors are used)
WHEELS = ("gymnasium==1.4.0", "farama-notifications==0.0.6", "stockstats==0.6.10", "empyrical-reloaded==0.7.1")
#: seconds per phase; together under 8 minutes with the machine's start-up
CAPS = {"env_eager": 75, "env_compiled": 150, "env_cuda_graph": 45, "ppo_learn": 45, "sac_learn": 45, "export_cpu": 60}


def emit(line: dict) -> None:
    print(json.dumps(line), flush=True)


class PhaseTimeout(Exception):
    """A phase ran past its cap."""


@contextlib.contextmanager
def capped(seconds: int):
    def _alarm(signum, frame):
        raise PhaseTimeout(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_phase(name: str, fn, cap: int) -> dict:
    """Run ``fn() -> dict`` under ``cap`` seconds and print its JSON line (a failure is a result)."""
    start = time.perf_counter()
    try:
        with capped(cap):
            line = {"phase": name, "status": "ok", **fn()}
    except PhaseTimeout as exc:
        line = {"phase": name, "status": "timeout", "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the check reports every failure and goes on
        first = (str(exc).strip().splitlines() or [""])[0]
        line = {"phase": name, "status": "failed", "error": f"{type(exc).__name__}: {first[:300]}"}
    line["seconds"] = round(time.perf_counter() - start, 2)
    emit(line)
    return line


# ---------------------------------------------------------------------------------- phases
class Check:
    def __init__(self, dry_run: bool, data_dir: Path) -> None:
        import torch

        from trainer.data.pipeline import load_market_data
        from trainer.demo import demo_task_dict
        from trainer.task import TaskSpec
        from trainer.util.device import configure_device

        self.torch = torch
        self.dry = dry_run
        self.cuda = torch.cuda.is_available() and not dry_run
        self.device = torch.device("cuda", 0) if self.cuda else torch.device("cpu")
        configure_device(self.device)
        if not self.cuda:
            torch.set_num_threads(1)
        task = demo_task_dict()
        task["data"] = {"paths": [DOW30_FILE], "start": SLICE[0], "end": SLICE[1]}
        if dry_run:
            task["data"]["tickers"] = ["AAPL", "MSFT", "JPM", "KO"]
        task["train"] = {"start": SLICE[0], "end": "2019-12-31"}
        task["validation"] = {"start": "2020-01-01", "end": "2020-06-30"}
        task["test"] = {"start": "2020-07-01", "end": SLICE[1]}
        self.task_dict = task
        self.task = TaskSpec.from_dict(task)
        self.market = load_market_data(self.task.data, data_dir=data_dir)
        self.train = self.market.slice(*self.task.train, name="train")
        self.sizes = [16, 64] if dry_run else [1024, 4096, 65536]

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def make_env(self, kind: str, num_envs: int, episode_length: int | None = None):
        from trainer.envs.kinds import prepare_market
        from trainer.envs.portfolio import PortfolioVecEnv
        from trainer.envs.portfolio_config import PortfolioConfig
        from trainer.envs.stock_config import EnvConfig
        from trainer.envs.stock_trading import StockTradingVecEnv

        config = (PortfolioConfig if kind == "portfolio" else EnvConfig)(episode_length=episode_length)
        cls = PortfolioVecEnv if kind == "portfolio" else StockTradingVecEnv
        # the accelerator path (its default on CUDA; forced on the CPU of the dry run)
        return cls(
            prepare_market(self.train, config),
            config,
            num_envs=num_envs,
            device=self.device,
            seed=0,
            state_info=False,
            sync_free=True,
        )

    def actions(self, env, count: int = 8):
        torch = self.torch
        g = torch.Generator(device=self.device).manual_seed(0)
        return torch.rand((count, env.num_envs, env.action_dim), device=self.device, generator=g) * 2 - 1

    def rate(self, step, actions, seconds: float) -> tuple[float, int]:
        """Vector steps of ``step`` for about ``seconds`` after 5 warm-ups: (env-steps/s, steps)."""
        for i in range(5):
            step(actions[i % len(actions)])
        self.sync()
        calls, start = 0, time.perf_counter()
        while True:
            for _ in range(10):
                step(actions[calls % len(actions)])
                calls += 1
            self.sync()
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return calls * actions.shape[1] / elapsed, calls

    def env_eager(self) -> dict:
        torch = self.torch
        rows = []
        for kind in ("portfolio", "stock_trading"):
            for n in self.sizes:
                env = self.make_env(kind, n)
                actions = self.actions(env)
                rate, calls = self.rate(env.step, actions, 0.3 if self.dry else 3.0)
                syncs = None
                if self.cuda:  # every synchronizing CUDA call warns once per call in "warn" mode
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        torch.cuda.set_sync_debug_mode("warn")
                        try:
                            for i in range(20):
                                env.step(actions[i % len(actions)])
                        finally:
                            torch.cuda.set_sync_debug_mode("default")
                    syncs = sum("synchroniz" in str(w.message) for w in caught) / 20
                rows.append({"env": kind, "num_envs": n, "env_steps_per_s": round(rate), "syncs_per_step": syncs})
        return {"rows": rows}

    def _compare(self, kind: str, n: int, wrap) -> dict:
        """Step an eager env and a twin through ``wrap(twin.step)`` with the same actions; the
        largest difference of every float output, then the wrapped step's rate."""
        torch = self.torch
        eager, twin = self.make_env(kind, n, 5), self.make_env(kind, n, 5)  # episodes end within the check
        step = wrap(twin)
        actions = self.actions(eager)
        worst, ends = 0.0, 0
        for i in range(12):
            a = eager.step(actions[i % len(actions)])
            b = step(actions[i % len(actions)])
            for x, y in zip(a[:4], b[:4], strict=True):
                if x.is_floating_point():
                    worst = max(worst, float((x - y).abs().max()))
                elif not torch.equal(x, y):
                    raise AssertionError(f"{kind}: integer or boolean output differs from eager")
            ends += int(a[3].sum())
        rate, _ = self.rate(step, actions, 0.2 if self.dry else 2.0)
        return {"env": kind, "num_envs": n, "max_abs_diff": worst, "episode_ends": ends, "env_steps_per_s": round(rate)}

    def env_compiled(self) -> dict:
        torch = self.torch
        backend = "aot_eager" if self.dry else "inductor"
        rows = []
        cases = [("portfolio", self.sizes[-1]), ("stock_trading", self.sizes[0])]
        if not self.dry:
            cases.insert(0, ("portfolio", self.sizes[1]))
        for kind, n in cases:
            torch._dynamo.reset()
            rows.append(self._compare(kind, n, lambda env: torch.compile(env.step, fullgraph=True, backend=backend)))
        return {"backend": backend, "rows": rows}

    def env_cuda_graph(self) -> dict:
        if not self.cuda:
            return {"status": "skipped", "reason": "no CUDA (dry run)"}
        from trainer.envs.graphed import CudaGraphStep

        rows = [
            self._compare(kind, n, lambda env: CudaGraphStep(env))
            for kind in ("portfolio", "stock_trading")
            for n in self.sizes[1:]
        ]
        return {"rows": rows}

    def _learn(self, algorithm: str, hyperparameters: dict, env_steps: int) -> dict:
        torch = self.torch
        from trainer.agents import make_agent

        env = self.make_env("portfolio", hyperparameters["num_envs"])
        agent = make_agent(algorithm, env.obs_dim, env.action_dim, hyperparameters, device=self.device, seed=0)
        timers = {"collect_s": 0.0, "update_s": 0.0}
        names = {"collect_s": "_collect", "update_s": "_train_on_rollout" if algorithm == "ppo" else "_update"}
        for key, method in names.items():
            if not hasattr(agent, method):
                continue
            original = getattr(agent, method)

            def timed(*args, _original=original, _key=key, **kwargs):
                self.sync()
                start = time.perf_counter()
                out = _original(*args, **kwargs)
                self.sync()
                timers[_key] += time.perf_counter() - start
                return out

            setattr(agent, method, timed)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        stats = agent.learn(env, env_steps)
        self.sync()
        wall = time.perf_counter() - start
        if algorithm != "ppo":  # off-policy: collection is what the updates leave
            timers["collect_s"] = wall - timers["update_s"]
        peak = torch.cuda.max_memory_allocated() / 2**20 if self.cuda else None
        return {
            "algorithm": algorithm,
            "num_envs": hyperparameters["num_envs"],
            "env_steps": int(stats["env_steps"]),
            "wall_s": round(wall, 3),
            "env_steps_per_s": round(stats["env_steps"] / wall),
            **{k: round(v, 3) for k, v in timers.items()},
            "peak_device_mib": None if peak is None else round(peak, 1),
        }

    def ppo_learn(self) -> dict:
        n = 16 if self.dry else 4096
        hp = {"num_envs": n, "rollout_steps": 8 if self.dry else 16}
        return self._learn("ppo", hp, hp["rollout_steps"] * n * (2 if self.dry else 6))

    def sac_learn(self) -> dict:
        n = 16 if self.dry else 1024
        hp = {
            "num_envs": n,
            "batch_size": 64 if self.dry else 4096,
            "buffer_size": 4096 if self.dry else 2**20,
            "learning_starts": 64 if self.dry else 4096,
        }
        return self._learn("sac", hp, n * (10 if self.dry else 100))

    def export_cpu(self) -> dict:
        torch = self.torch
        from trainer.artifacts.bundle import export_bundle
        from trainer.artifacts.bundle_reader import load_agent
        from trainer.artifacts.checkpoints import load_checkpoint
        from trainer.artifacts.rebuild import build_agent
        from trainer.pod import run_generation

        with tempfile.TemporaryDirectory() as tmp:
            hp = {"num_envs": 16 if self.dry else 2048, "rollout_steps": 8 if self.dry else 16}
            result = run_generation(
                {**self.task_dict, "hyperparameters": hp},
                env_steps=hp["num_envs"] * hp["rollout_steps"] * 2,
                out_path=Path(tmp) / "g1.pt",
                seed=0,
                device=self.device,
                market_data=self.market,
            )
            state = load_checkpoint(result.checkpoint_path)
            export_bundle(result.checkpoint_path, Path(tmp) / "agent.zip")
            loaded = load_agent(Path(tmp) / "agent.zip", device="cpu")
            agent = build_agent(state)
            obs = torch.zeros(1, agent.obs_dim)
            expected = agent.policy_module()(obs).detach().numpy()[0]
            got = loaded.act(obs.numpy()[0])
            diff = float(abs(expected - got).max())
            if diff > 1e-5:
                raise AssertionError(f"the bundle's CPU policy differs from the checkpoint's by {diff}")
            return {
                "trained_on": str(self.device),
                "validation_score": result.score,
                "checkpoint_tensors_on_cpu": all(t.device.type == "cpu" for t in state["agent"]["actor"].values()),
                "bundle_vs_checkpoint_max_diff": diff,
            }


def run(args) -> int:
    import torch

    data_dir = (
        Path(args.data_dir)
        if args.data_dir
        else (CHECK_DIR / "data" if (CHECK_DIR / "data").exists() else REPO.parent / "shared" / "data")
    )
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device; use --dry-run", file=sys.stderr)
        return 2
    check = Check(args.dry_run, data_dir)
    emit(
        {
            "phase": "machine",
            "status": "ok",
            "device": torch.cuda.get_device_name(0) if check.cuda else "cpu (dry run)",
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "python": sys.version.split()[0],
            "data": f"{check.train.num_stocks} tickers, {check.train.num_days} train days",
        }
    )
    failed = 0
    for name in CAPS:
        cap = 60 if args.dry_run else CAPS[name]
        line = run_phase(name, getattr(check, name), cap)
        failed += line["status"] in ("failed", "timeout")
    return 1 if failed else 0


def prepare(args) -> int:
    """Write ``.devicecheck/data`` (the Dow-30 slice) and, unless ``--no-wheels``, ``.devicecheck/wheels``."""
    import subprocess

    import pandas as pd

    source = Path(args.data_dir or REPO.parent / "shared" / "data") / DOW30_FILE
    frame = pd.read_csv(source)
    date = next(c for c in frame.columns if c.lower() == "date")
    days = pd.to_datetime(frame[date])
    # a year of history before the slice, so the indicators and lookbacks are warmed up
    keep = (days >= pd.Timestamp(SLICE[0]) - pd.Timedelta(days=400)) & (days <= pd.Timestamp(SLICE[1]))
    out = Path(args.dir) / "data"
    out.mkdir(parents=True, exist_ok=True)
    frame[keep].to_csv(out / DOW30_FILE, index=False, compression="gzip")
    print(f"gpu_check prepare: {int(keep.sum()):,} rows -> {out / DOW30_FILE}")
    if args.no_wheels:
        return 0
    wheels = Path(args.dir) / "wheels"
    platforms = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        *platforms,
        "-d",
        str(wheels),
        *WHEELS,
    ]
    return subprocess.run(command, check=False).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    run_parser = sub.add_parser("run", help="run the phases (the default)")
    prep = sub.add_parser("prepare", help="write .devicecheck/ (data slice, wheels) on a machine with the data")
    for p in (parser, run_parser):
        p.add_argument("--dry-run", action="store_true", help="every phase tiny, on the CPU")
        p.add_argument("--data-dir", default=None)
    prep.add_argument("--data-dir", default=None)
    prep.add_argument("--no-wheels", action="store_true")
    prep.add_argument("--dir", default=str(CHECK_DIR), help="where to write data/ and wheels/ (default .devicecheck)")
    args = parser.parse_args()
    if args.command == "prepare":
        return prepare(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
