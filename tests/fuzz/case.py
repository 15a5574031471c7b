"""One drawn stress program (stress.py, stress_nn.py) and the helpers the generators share."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class Case:
    """One drawn program: `run(m, scalars, data)` returns a list of results (tensors or numbers).
    Every case is run twice: as drawn, then with other Python scalars and other data of the same
    shapes and dtypes (the same structure), which must agree with torch too; when `expect_hit`,
    the second run must not compile anything (the graph cache serves it)."""
    kind: str
    run: Callable
    scalars: list[float]
    data: list[np.ndarray]
    rtol: float = 2e-4
    atol: float = 2e-5
    expect_hit: bool = True


def normal_data(rng: random.Random, shape, n: int) -> list[np.ndarray]:
    g = np.random.default_rng(rng.randrange(1 << 30))
    return [g.standard_normal(shape).astype(np.float32) for _ in range(n)]


def other_data(x: np.ndarray, rng: random.Random) -> np.ndarray:
    """Other values of the same shape and dtype: floats reversed and rescaled, integers permuted
    (so indices stay in range), 0-d values kept."""
    if x.ndim == 0 or x.size == 0:
        return x.copy()
    if np.issubdtype(x.dtype, np.floating):
        return (x[::-1] * rng.uniform(0.5, 2)).astype(x.dtype)
    flat = x.reshape(-1).copy()
    np.random.default_rng(rng.randrange(1 << 30)).shuffle(flat)
    return flat.reshape(x.shape)


def other_scalars(scalars: list[float], rng: random.Random) -> list[float]:
    return [round(s * rng.uniform(0.5, 1.5) + rng.uniform(-0.1, 0.1), 3) for s in scalars]
