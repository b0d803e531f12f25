"""Reads of the runs app, one concept per module; nothing in this package writes (an ORM write
is a service's, :mod:`webapp.runs.services`, and this package never imports that one):

- :mod:`.runs`: the runs list, one user's runs, agents, tasks and datasets, the leaderboard
  rows, a run's score history and the ``TaskSpec`` dict a generation trains on;
- :mod:`.budgets`: a budget's slots, usage and progress, the budgets a user sees;
- :mod:`.quotas`: what a user may hold in budgets of their own;
- :mod:`.payloads`: the run, pod, generation and leaderboard payloads of live events and pages;
- :mod:`.ensembles`: the ensemble K a run offers, a stored ensemble of a member set;
- :mod:`.baselines`, :mod:`.deflated`: an agent's result next to its baselines and noise, and
  its Deflated Sharpe Ratios;
- :mod:`.lineage`, :mod:`.curves`, :mod:`.compare`: the all-agents table and lineage, the
  training curves, the cross-run comparison;
- :mod:`.run_table`, :mod:`.seed_groups`: the runs table's extra columns, seed groups;
- :mod:`.estimate`, :mod:`.eta`, :mod:`.workers`: the New run page's estimate, the live page's
  ETA and the staff workers page.

Functions taking ``user`` are scoped to that user: a row of somebody else's answers ``None``
(views turn that into a 404), so there is one place to get isolation right.
"""
