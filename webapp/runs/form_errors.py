"""Where a service error shows on the New run form and in which words: the error's field path
(``env.hmax``, ``train.end``, ``hyperparameters.learning_rate``) names the form field, and the
message loses the internal dotted names the form shows as labels instead."""

from __future__ import annotations

import functools
import re

from webapp import engine
from webapp.core.errors import without_field_name

# Where an error naming a task/run field (dotted, from the services) is shown on the form.
SPLIT_FIELDS = {
    f"{split}.{end}": f"{split}_{end}" for split in ("train", "validation", "test") for end in ("start", "end")
}
# Dotted names in service messages, as the form says them: the split bounds in words, and no
# prefix on env fields and JSON keys (the form shows those under their own label / as typed).
_JSON_HEADS = ("env", "algorithm_hyperparameters", "hyperparameters", "mutation")


@functools.cache
def _dotted_name() -> re.Pattern[str]:
    """The split bounds (``train.end``) and the prefixes of env fields, JSON keys and each
    algorithm's settings (``sac.``, from :func:`webapp.engine.algorithms`, so a new algorithm
    needs no edit here)."""
    heads = "|".join(map(re.escape, (*_JSON_HEADS, *engine.algorithms())))
    return re.compile(rf"\b(train|validation|test)\.(start|end)\b|\b(?:{heads})\.(?=\w)")


_SPLIT_WORDS = {"train": "training", "validation": "validation", "test": "test"}
_JSON_FIELDS = ("hyperparameters", "mutation", "algorithm_hyperparameters")


def field_error_text(name: str, target: str | None, message: str) -> str:
    """The message of service error field ``name`` as shown on form field ``target`` (``None``:
    at the top of the form): said once, without internal dotted names."""
    text = without_field_name(name, message)
    text = _dotted_name().sub(lambda m: f"the {_SPLIT_WORDS[m[1]]} {m[2]}" if m[1] else "", text)
    if target in _JSON_FIELDS and name != target:
        key = name.partition(".")[2]  # the JSON key the user typed, e.g. learning_rate
        if key and key not in text:
            text = f"{key}: {text}"
    elif target is None and name != "non_field_errors":
        text = f"{_dotted_name().sub(lambda m: f'{m[1]} {m[2]}' if m[1] else '', name)}: {text}"
    return text


#: Form fields that other checks read (the task's kind picks its env and the algorithms it
#: takes; the algorithm its settings), and the heads of the service error names that depend on
#: each. When such a field failed, the services check the rest with a stand-in (stock trading,
#: the kind's default algorithm), so their errors about a dependent field are about a value the
#: user did not give ("direct trains portfolio tasks only" under ``kind=foo``) and are left out.
DEPENDS_ON = {
    "kind": ("kind", "algorithm", "algorithms", "env", "hyperparameters", "algorithm_hyperparameters"),
    "algorithm": ("algorithm", "algorithms", "hyperparameters", "algorithm_hyperparameters"),
}


def depends_on_failed(name: str, failed) -> bool:
    """Whether service error field ``name`` (``env.hmax``, ``algorithm``) reads a form field
    in ``failed`` (the names of the form's fields that already show an error)."""
    head = name.partition(".")[0]
    return any(head in DEPENDS_ON.get(field, ()) for field in failed)


def form_field_for(name: str, fields: dict) -> str | None:
    """The form field that shows service error field ``name`` (``None``: the top of the form)."""
    if name in fields:
        return name
    if name in SPLIT_FIELDS:
        return SPLIT_FIELDS[name]
    head, _, rest = name.partition(".")
    if head in ("train", "validation", "test"):
        return f"{head}_start"
    if head == "env" and rest in fields:
        return rest
    if head in ("hyperparameters", "mutation", "algorithm", "tickers", "algorithm_hyperparameters"):
        return head
    if head == "data":
        return "dataset"
    return None
