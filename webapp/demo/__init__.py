"""The demo: Dow-30 data, a demo budget and a tournament of the portfolio default, ``direct``
(or ``--algorithm``), sized to this machine.

``manage.py demo_setup`` (run by ``./paddock demo``) and the acceptance test
(``tests/e2e/test_acceptance.py``) both build on these definitions:

* **Data.** The Dow 30 daily prices (2010-01-04 to 2022-11-15) and QQQ, the benchmark, are
  read from ``PADDOCK_DATA_DIR``. When a file is absent and Yahoo Finance answers, it is
  downloaded once with ``trainer.data.download_yfinance`` into that folder; offline, the
  command stops with a message saying which files to copy where. The dataset keeps the tickers
  with full history from the first day of the file: DOW (listed 2019-03-20) is dropped, and a
  note on the dataset says so.
* **Task.** The portfolio default chosen on validation (docs/default-selection.md): ``direct``
  with its defaults (``demo_setup --algorithm`` trains PPO, A2C, SAC, TD3 or DDPG instead;
  ``--kind stock_trading`` and ``--intraday`` train PPO); train 2010-01-01 to 2019-12-31,
  validation 2020, test 2021-01-01 to 2022-11-15 (held out: backtested against QQQ when the
  run ends).
* **Sizing.** The daily portfolio demo trains a fixed budget chosen on validation
  (``profiles.with_benchmark_budget``: PPO the learning-quality benchmark's, ``direct`` the
  default selection's 2M env steps per generation). Otherwise the chosen algorithm's training rate is measured for a few seconds on the device the training
  workers use; a generation is sized to last about :attr:`DemoProfile.generation_s` and the run
  to train for about :attr:`DemoProfile.training_s` in all (about 8 minutes on a 2-core CPU, 5
  with a GPU, where the profile also trains 4x as many envs).
* **Idempotence.** The dataset, the budget and the task are created once per user and reused.
  A demo run that is still active (running, paused or finishing, and within its wall-clock
  limit) is reused: running the demo again while it trains just prints its page again. Only
  runs the demo started count (the demo task, named ``"Dow 30 DIRECT demo #N"``): the user's own
  runs on the demo budget are never taken for it, nor stopped by ``--new-run``. Otherwise a
  new run starts, and the budget's env-step cap is raised by what the new run may use (the cap
  counts the budget's whole life, so an unchanged cap would be spent by the first demo run).

One concept per module: :mod:`.profiles` (the task, names and machine profiles), :mod:`.sizing`
(a measured rate turned into a run's size), :mod:`.data` (files and the dataset) and
:mod:`.launch` (budget, task and run); callers import each name from its module. The
commands ``manage.py demo_setup`` and ``manage.py demo_account`` live in this app's
``management/commands/``.
"""
