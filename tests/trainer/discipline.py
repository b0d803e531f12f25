"""A stand-in accelerator for CPU-only machines, to test device discipline without a GPU.

Paddock's accelerator path must (1) keep every tensor that meets a device tensor on the device,
(2) draw random numbers with a generator of the tensor's device type, (3) never call
``.numpy()`` on a device tensor, and (4) wait for the device (a host sync) only where the budget
says. A CUDA run shows breaches of (1)-(3) as errors and (4) as lost speed; this harness shows
all four on a CPU.

How: PyTorch's PrivateUse1 backend is registered from Python under the name ``fakegpu``
(``torch.utils.backend_registration._setup_privateuseone_for_python_backend``, experimental: no
public API registers a Python backend with a device guard). ``fakegpu`` tensors are wrapper
subclasses holding a CPU tensor; a ``TorchDispatchMode`` (public) sees every aten operation,
checks it, runs it on the held CPU tensors and wraps the results. Generators cannot be
registered for a Python backend, so :class:`StandInGenerator` (installed as ``torch.Generator``
while the harness is active) is a CPU generator that reports the ``fakegpu`` device and, like a
CUDA generator, has a 16-byte state.

Counted as host syncs (operations whose result the CPU must wait for): reading a value
(``item``, ``bool``, ``tolist``: ``_local_scalar_dense``, ``is_nonzero``), data-dependent
shapes (``nonzero``, boolean-mask indexing, ``masked_select``, ``unique``), ``equal``,
device-to-host copies and host-to-device copies (``torch.tensor(x, device=...)``,
``cpu_tensor.to(device)``: a pageable copy blocks the host until the device has it).

Float64 allocation arithmetic is counted too (``Discipline.float64_ops``): a device operation
on or producing a float64 tensor of 2 or more dimensions (per-env, per-stock work; FP64 runs at
1/2 to 1/64 of the FP32 rate on GPUs). Per-env float64 vectors (cash, portfolio value) are allowed.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
from collections.abc import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

DEVICE_TYPE = "fakegpu"
aten = torch.ops.aten

SYNC_OPS = {
    aten._local_scalar_dense.default,
    aten.is_nonzero.default,
    aten.nonzero.default,
    aten.equal.default,
    aten.masked_select.default,
    aten._unique2.default,
    aten.unique_dim.default,
    aten.unique_consecutive.default,
}


class DisciplineError(AssertionError):
    """A device-discipline breach: the message names the operation and the tensors."""


def install() -> torch.device:
    """Register the ``fakegpu`` backend once per process and return ``fakegpu:0``."""
    if torch._C._get_privateuse1_backend_name() != DEVICE_TYPE:
        torch.utils.backend_registration._setup_privateuseone_for_python_backend(rename=DEVICE_TYPE)
        # Creating a tensor from Python data (torch.tensor, as_tensor) allocates on the backend and
        # copies into it below the Python dispatch layer: these two kernels serve that path.
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("empty_strided", _empty_strided, "PrivateUse1")
        lib.impl("empty.memory_format", _empty, "PrivateUse1")
        lib.impl("_copy_from", _copy_from, "PrivateUse1")
        _LIBRARIES.append(lib)
    return torch.device(DEVICE_TYPE, 0)


_LIBRARIES: list[torch.library.Library] = []
_ACTIVE: list[Discipline] = []  # the running harness, for the checks outside the dispatch mode


class AcceleratorTensor(torch.Tensor):
    """A ``fakegpu`` tensor: reports the stand-in device, holds its values in a CPU tensor."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> AcceleratorTensor:
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.shape,
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            device=torch.device(DEVICE_TYPE, 0),
            requires_grad=elem.requires_grad,
        )
        out.elem = elem
        return out

    def __repr__(self) -> str:  # no device op: printing must not count as a sync
        return f"AcceleratorTensor(shape={tuple(self.shape)}, dtype={self.dtype})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise DisciplineError(f"{func} on a {DEVICE_TYPE} tensor outside the discipline harness")

    def numpy(self, *args, **kwargs):
        raise DisciplineError(f".numpy() on a {DEVICE_TYPE} tensor of shape {tuple(self.shape)}; move it to the CPU")

    def __deepcopy__(self, memo):
        """A copy on the same stand-in device (``copy.deepcopy`` of a module on the device)."""
        if id(self) not in memo:
            out = AcceleratorTensor(self.elem.detach().clone())
            out.requires_grad_(self.requires_grad)
            if getattr(self, "_is_param", False):
                out._is_param = True
            memo[id(self)] = out
        return memo[id(self)]

    def tolist(self):
        """A device-to-host copy (PyTorch's ``tolist`` refuses subclasses, so it is done here)."""
        if _ACTIVE:
            _ACTIVE[-1]._sync("Tensor.tolist")
        return self.elem.tolist()


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return AcceleratorTensor(torch.empty_strided(size, stride, dtype=dtype))


def _empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return AcceleratorTensor(torch.empty(size, dtype=dtype))


def _copy_from(src, dst, non_blocking=False):
    if _ACTIVE and isinstance(dst, AcceleratorTensor) and not isinstance(src, AcceleratorTensor):
        _ACTIVE[-1]._sync("host-to-device copy (aten._copy_from)")
    source = src.elem if isinstance(src, AcceleratorTensor) else src
    (dst.elem if isinstance(dst, AcceleratorTensor) else dst).copy_(source)
    return dst


def _fingerprint(generator: torch.Generator) -> bytes:
    return hashlib.blake2b(torch._C.Generator.get_state(generator).numpy().tobytes(), digest_size=16).digest()


class _Registry:
    """Which device type each live generator state belongs to (by a hash of the state)."""

    def __init__(self) -> None:
        self.types: dict[bytes, set[str]] = collections.defaultdict(set)
        self.full_states: dict[bytes, torch.Tensor] = {}


REGISTRY = _Registry()


#: Mixed into the seeds of ``fakegpu`` generators, so that their states never equal a CPU
#: generator's (the harness tells generators apart by their state).
FAKE_SEED_MARK = 0x5EED_FA4E_0000_0000
DEFAULT_SEED = 67280421310721  # what a new torch.Generator starts from


class StandInGenerator(torch.Generator):
    """``torch.Generator`` while the harness runs: a ``fakegpu`` one is a CPU generator that
    reports the stand-in device and, like CUDA's Philox generator, saves a 16-byte state.

    The dispatch mode receives generators as new Python objects (not this subclass), so it tells
    a ``fakegpu`` generator by its state: such states are registered, and seeds are mixed with
    :data:`FAKE_SEED_MARK`. An unregistered state is a CPU generator's.
    """

    def __new__(cls, device: str | torch.device = "cpu"):
        dev = torch.device(device)
        gen = super().__new__(cls, "cpu" if dev.type == DEVICE_TYPE else dev)
        gen._device = dev
        if dev.type == DEVICE_TYPE:
            gen.manual_seed(DEFAULT_SEED)
        return gen

    def __init__(self, device: str | torch.device = "cpu") -> None:
        pass

    @property
    def device(self) -> torch.device:
        return self._device

    def _register(self) -> None:
        if self._device.type == DEVICE_TYPE:
            REGISTRY.types[_fingerprint(self)].add(DEVICE_TYPE)

    def manual_seed(self, seed: int):
        if self._device.type == DEVICE_TYPE:
            seed = (int(seed) ^ FAKE_SEED_MARK) & (2**64 - 1)
        super().manual_seed(seed)
        self._register()
        return self

    def get_state(self) -> torch.Tensor:
        full = super().get_state()
        if self._device.type != DEVICE_TYPE:
            return full
        token = hashlib.blake2b(full.numpy().tobytes(), digest_size=16).digest()
        REGISTRY.full_states[token] = full
        return torch.tensor(list(token), dtype=torch.uint8)

    def set_state(self, state: torch.Tensor):
        if self._device.type != DEVICE_TYPE:
            super().set_state(state)
        else:
            if state.numel() != 16:  # what a CUDA generator says to a CPU state
                raise RuntimeError(f"RNG state is wrong size: a {DEVICE_TYPE} generator state has 16 bytes")
            super().set_state(REGISTRY.full_states[bytes(state.tolist())])
        self._register()
        return self


class Discipline(TorchDispatchMode):
    """Check every aten operation; count host syncs per phase (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "setup"
        self.syncs: collections.Counter[str] = collections.Counter()
        self.sync_ops: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.device_ops: collections.Counter[str] = collections.Counter()
        self.float64_ops: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Run the body without the mode: for code that only touches CPU tensors and trips on
        Python dispatch itself (the TorchScript-based ONNX exporter's constant folding)."""
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            yield

    @contextlib.contextmanager
    def in_phase(self, name: str) -> Iterator[Discipline]:
        previous, self.phase = self.phase, name
        try:
            yield self
        finally:
            self.phase = previous

    def _sync(self, func) -> None:
        self.syncs[self.phase] += 1
        self.sync_ops[self.phase][str(func)] += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        leaves = tree_flatten((args, kwargs))[0]
        on_device = [t for t in leaves if isinstance(t, AcceleratorTensor)]
        on_host = [t for t in leaves if isinstance(t, torch.Tensor) and not isinstance(t, AcceleratorTensor)]
        target = kwargs.get("device")
        target_type = torch.device(target).type if target is not None else None
        creates_on_device = target_type == DEVICE_TYPE
        copies_to_host = bool(on_device) and target_type == "cpu"
        copy_between = func in (aten.copy_.default, aten._copy_from.default)

        if on_device and not copies_to_host and not copy_between:
            big = [t for t in on_host if t.dim() > 0]
            if big:
                raise DisciplineError(
                    f"{func}: a CPU tensor of shape {tuple(big[0].shape)} meets a {DEVICE_TYPE} tensor "
                    f"(phase {self.phase!r})"
                )
        generator = kwargs.get("generator")
        owners: set[str] = set()
        if generator is not None:
            op_type = DEVICE_TYPE if (on_device or creates_on_device) else "cpu"
            owners = set(REGISTRY.types.get(_fingerprint(generator), {"cpu"}))
            if op_type not in owners:
                raise DisciplineError(
                    f"{func}: a {'/'.join(sorted(owners))} generator draws for a {op_type} tensor (phase {self.phase!r})"
                )
        if on_device:
            self.device_ops[self.phase] += 1
            boolean_index = func is aten.index.Tensor and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else ())
            )
            copy_to_host = copy_between and not isinstance(args[0], AcceleratorTensor)
            copy_to_device = copy_between and isinstance(args[0], AcceleratorTensor) and bool(on_host)
            if func in SYNC_OPS or copies_to_host or boolean_index or copy_to_host or copy_to_device:
                self._sync(func)
        elif creates_on_device and on_host:  # cpu_tensor.to(device): a host-to-device copy
            self._sync(func)

        wrap = (bool(on_device) or creates_on_device) and not copies_to_host
        if creates_on_device:
            kwargs["device"] = torch.device("cpu")
        originals = {id(t.elem): t for t in on_device}
        out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
        if generator is not None:  # its state moved on: the new state has the same owners
            REGISTRY.types[_fingerprint(generator)].update(owners)
        if not wrap:
            return out
        if copy_between and not isinstance(args[0], AcceleratorTensor):
            return out
        if _wide_float64(on_device) or _wide_float64([t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]):
            self.float64_ops[self.phase][str(func)] += 1

        def rewrap(x):
            if not isinstance(x, torch.Tensor):
                return x
            original = originals.get(id(x))
            return original if original is not None else AcceleratorTensor(x)

        return tree_map(rewrap, out)


def _wide_float64(tensors) -> bool:
    """Whether any of ``tensors`` is float64 with 2 or more dimensions (allocation arithmetic)."""
    return any(t.dtype == torch.float64 and t.dim() >= 2 for t in tensors)


def _unwrap(x):
    return x.elem if isinstance(x, AcceleratorTensor) else x


@contextlib.contextmanager
def stand_in_accelerator(monkeypatch) -> Iterator[tuple[torch.device, Discipline]]:
    """Run the body with the ``fakegpu`` device, its generators and the discipline mode.

    Yields ``(device, mode)``; ``mode.in_phase(name)`` attributes host syncs to ``name`` and
    ``mode.syncs[name]`` counts them.
    """
    device = install()
    monkeypatch.setattr(torch, "Generator", StandInGenerator)
    mode = Discipline()
    _ACTIVE.append(mode)
    try:
        with mode:
            yield device, mode
    finally:
        _ACTIVE.remove(mode)
