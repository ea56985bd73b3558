"""Seeded synthetic direct identifiers for the demo table (no real person is described)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
from faker import Faker

# Census extract date of the Adult data: ages are as of 1994.
REFERENCE_DATE = dt.date(1994, 7, 1)


def add_synthetic_pii(df: pd.DataFrame, *, seed: int = 1994) -> pd.DataFrame:
    fake = Faker("en_US")
    fake.seed_instance(seed)
    rng = np.random.default_rng(seed)
    n = len(df)
    sexes = df["sex"].tolist() if "sex" in df.columns else ["Female"] * n
    names = [fake.name_male() if s == "Male" else fake.name_female() for s in sexes]
    ssns = [fake.ssn() for _ in range(n)]
    # A pool of ZIP codes shared by many people, as in a real regional extract.
    zip_pool = np.array([fake.postcode() for _ in range(60)])
    zips = zip_pool[rng.integers(0, len(zip_pool), n)]
    ages = df["age"].astype(int).to_numpy() if "age" in df.columns else rng.integers(18, 90, n)
    offsets = rng.integers(0, 365, n)
    dobs = [
        (REFERENCE_DATE - dt.timedelta(days=int(a) * 365 + int(o) + int(a) // 4)).isoformat()
        for a, o in zip(ages, offsets, strict=True)
    ]
    out = df.copy()
    out.insert(0, "name", names)
    out.insert(1, "ssn", ssns)
    out.insert(2, "birth_date", dobs)
    out.insert(3, "zip", zips)
    return out
